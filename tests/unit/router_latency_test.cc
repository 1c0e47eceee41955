// Latency EMA arithmetic and the slow flag.
#include <gtest/gtest.h>

#include <cmath>

#include "router/latency_ema.h"

namespace sanctum::router {
namespace {

TEST(RouterLatency, first_sample_is_taken_as_is_then_exponential_smoothing) {
  LatencyEma e(0.25);
  EXPECT_FALSE(e.value().has_value());
  e.observe(0.100);
  EXPECT_DOUBLE_EQ(*e.value(), 0.100);
  e.observe(0.500);
  EXPECT_DOUBLE_EQ(*e.value(), 0.25 * 0.5 + 0.75 * 0.1);
  e.observe(0.500);
  EXPECT_NEAR(*e.value(), 0.25 * 0.5 + 0.75 * 0.2, 1e-12);
  EXPECT_EQ(e.samples(), 3);
}

TEST(RouterLatency, converges_to_a_new_steady_latency) {
  LatencyEma e(0.2);
  e.observe(1.0);
  for (int i = 0; i < 60; ++i) e.observe(0.01);
  EXPECT_NEAR(*e.value(), 0.01, 1e-4);
}

TEST(RouterLatency, bad_samples_are_ignored) {
  LatencyEma e(0.5);
  e.observe(-1);
  e.observe(std::nan(""));
  EXPECT_FALSE(e.value().has_value());
}

TEST(RouterLatency, slow_means_past_the_factor_of_the_best_equivalent_or_the_absolute_limit) {
  EXPECT_TRUE(is_slow(0.35, 0.1, 3.0, 0));
  EXPECT_FALSE(is_slow(0.25, 0.1, 3.0, 0));
  EXPECT_FALSE(is_slow(0.35, std::nullopt, 3.0, 0));  // nothing to compare with
  EXPECT_TRUE(is_slow(0.35, std::nullopt, 3.0, 0.3));
  EXPECT_FALSE(is_slow(0.35, 0.1, 0, 0));         // both rules off
  EXPECT_FALSE(is_slow(0.0009, 0.0001, 3.0, 0));  // sub-millisecond jitter is not slowness
}

}  // namespace
}  // namespace sanctum::router

// The circuit breaker's state machine: closed -> open after N consecutive failures, open ->
// half-open after the cool-down with exactly one probe, probe success closes, probe failure reopens.
#include <gtest/gtest.h>

#include "router/circuit_breaker.h"

namespace sanctum::router {
namespace {

using State = CircuitBreaker::State;
using Clock = CircuitBreaker::Clock;

Clock::time_point at(double s) {
  return Clock::time_point{} + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

TEST(RouterBreaker, opens_only_after_n_consecutive_failures) {
  CircuitBreaker b({3, 10});
  EXPECT_FALSE(b.on_failure(at(0)));
  EXPECT_FALSE(b.on_failure(at(1)));
  EXPECT_FALSE(b.on_success());  // a success in between resets the count
  EXPECT_FALSE(b.on_failure(at(2)));
  EXPECT_FALSE(b.on_failure(at(3)));
  EXPECT_EQ(b.state(), State::closed);
  EXPECT_TRUE(b.allow(at(3)));
  auto moved = b.on_failure(at(4));
  ASSERT_TRUE(moved);
  EXPECT_EQ(*moved, State::open);
  EXPECT_FALSE(b.allow(at(5)));
  EXPECT_FALSE(b.would_allow(at(13.9)));
}

TEST(RouterBreaker, half_open_admits_exactly_one_probe_after_the_cooldown) {
  CircuitBreaker b({1, 10});
  b.on_failure(at(0));
  EXPECT_FALSE(b.allow(at(9.99)));
  EXPECT_TRUE(b.would_allow(at(10)));
  std::optional<State> moved;
  EXPECT_TRUE(b.allow(at(10), &moved));
  ASSERT_TRUE(moved);
  EXPECT_EQ(*moved, State::half_open);
  EXPECT_FALSE(b.allow(at(10.1)));  // the probe is in flight: nobody else
  EXPECT_FALSE(b.would_allow(at(10.1)));
}

TEST(RouterBreaker, probe_success_closes_and_probe_failure_reopens_for_a_fresh_cooldown) {
  CircuitBreaker b({1, 10});
  b.on_failure(at(0));
  ASSERT_TRUE(b.allow(at(10)));
  auto reopened = b.on_failure(at(10.5));
  ASSERT_TRUE(reopened);
  EXPECT_EQ(*reopened, State::open);
  EXPECT_FALSE(b.allow(at(20)));  // the cool-down restarted at 10.5
  ASSERT_TRUE(b.allow(at(20.5)));
  auto closed = b.on_success();
  ASSERT_TRUE(closed);
  EXPECT_EQ(*closed, State::closed);
  EXPECT_TRUE(b.allow(at(20.6)));
  EXPECT_TRUE(b.allow(at(20.6)));  // closed admits everyone
  EXPECT_EQ(b.consecutive_failures(), 0);
}

TEST(RouterBreaker, an_abandoned_probe_frees_the_slot) {
  CircuitBreaker b({1, 1});
  b.on_failure(at(0));
  ASSERT_TRUE(b.allow(at(1)));
  EXPECT_FALSE(b.allow(at(1)));
  b.on_abandon();  // the client left before the probe had a verdict
  EXPECT_EQ(b.state(), State::half_open);
  EXPECT_TRUE(b.allow(at(1.1)));
}

}  // namespace
}  // namespace sanctum::router

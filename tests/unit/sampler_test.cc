#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/error.h"

namespace sanctum {

TEST(Sampler, greedy_picks_the_first_of_equal_maxima) {
  std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
  Sampler s({});
  EXPECT_EQ(s.sample(logits, RecentTokens()), 1);
}

TEST(Sampler, same_seed_same_sequence_different_seed_differs) {
  std::vector<float> base(50);
  for (size_t i = 0; i < base.size(); ++i) base[i] = std::sin(static_cast<float>(i));
  auto run = [&](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      auto l = base;
      out.push_back(s.sample(l, RecentTokens()));
    }
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampler, top_k_one_and_tiny_top_p_are_greedy) {
  std::vector<float> base = {0.5f, 2.0f, 1.9f, -3.0f};
  for (int mode = 0; mode < 2; ++mode) {
    SamplingParams p;
    p.temperature = 2.0f;
    p.seed = 3;
    if (mode == 0) p.top_k = 1;
    else p.top_p = 0.01f;
    Sampler s(p);
    for (int i = 0; i < 50; ++i) {
      auto l = base;
      EXPECT_EQ(s.sample(l, RecentTokens()), 1);
    }
  }
}

TEST(Sampler, sampled_frequencies_follow_the_softmax) {
  std::vector<float> base = {0.0f, 1.0f, 2.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 11;
  Sampler s(p);
  std::vector<int> counts(3);
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto l = base;
    counts[static_cast<size_t>(s.sample(l, RecentTokens()))]++;
  }
  double z = 1 + std::exp(1.0) + std::exp(2.0);
  for (int t = 0; t < 3; ++t) {
    double expected = std::exp(static_cast<double>(t)) / z;
    double sd = std::sqrt(expected * (1 - expected) / n);
    EXPECT_NEAR(counts[static_cast<size_t>(t)] / static_cast<double>(n), expected, 5 * sd) << t;
  }
}

TEST(Sampler, min_p_drops_unlikely_tokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.5f;
  Sampler s(p);
  std::vector<float> l = {0.0f, 5.0f, 4.8f, 0.1f};
  auto probs = s.probabilities(l, RecentTokens());
  EXPECT_EQ(probs[0], 0.0f);
  EXPECT_EQ(probs[3], 0.0f);
  EXPECT_GT(probs[1], probs[2]);
  EXPECT_NEAR(probs[1] + probs[2], 1.0f, 1e-6f);
}

TEST(Sampler, repetition_penalty_divides_positive_and_multiplies_negative_logits) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  RecentTokens recent(8);
  recent.push(0);
  recent.push(1);
  std::vector<float> l = {4.0f, -1.0f, 2.5f};
  EXPECT_EQ(s.sample(l, recent), 2);  // 4 → 2 < 2.5
  EXPECT_FLOAT_EQ(l[0], 2.0f);
  EXPECT_FLOAT_EQ(l[1], -2.0f);
}

TEST(RecentTokens, window_forgets_old_tokens) {
  RecentTokens r(2);
  r.push(5);
  r.push(6);
  r.push(6);
  EXPECT_EQ(r.counts().count(5), 0u);
  EXPECT_EQ(r.counts().at(6), 2);
}

TEST(Sampler, invalid_parameters_are_rejected) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_THROW(Sampler{p}, Error);
  p = {};
  p.temperature = -1.0f;
  EXPECT_THROW(Sampler{p}, Error);
}

}  // namespace sanctum

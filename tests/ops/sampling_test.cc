// The token-selection ops' scalar twins (ops/ref/sampling.h) against the host Sampler they mirror,
// and the ops' CPU dispatch. The GPU side is tests/gpu/cuda_sampling_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/ref/sampling.h"
#include "ops/sampling.h"
#include "sampling/sampler.h"

namespace sanctum {
namespace {

using test::Rng;

// Random logits with the awkward cases: repeated maxima, -inf, NaN, -0 beside +0.
std::vector<float> awkward_logits(Rng& rng, int64_t vocab, float scale) {
  std::vector<float> l(static_cast<size_t>(vocab));
  for (float& x : l) x = rng.normal() * scale;
  if (vocab >= 8) {
    const float top = *std::max_element(l.begin(), l.end()) + 0.5f;
    l[static_cast<size_t>(rng.integer(0, vocab - 1))] = top;  // a tie for the maximum
    l[static_cast<size_t>(rng.integer(0, vocab - 1))] = top;
    l[static_cast<size_t>(rng.integer(0, vocab - 1))] = -INFINITY;
    l[static_cast<size_t>(rng.integer(0, vocab - 1))] = NAN;
    l[static_cast<size_t>(rng.integer(0, vocab - 1))] = 0.0f;
    l[static_cast<size_t>(rng.integer(0, vocab - 1))] = -0.0f;
    const float mid = l[static_cast<size_t>(rng.integer(0, vocab - 1))];  // ties in the middle of the order
    for (int i = 0; i < 4; ++i) l[static_cast<size_t>(rng.integer(0, vocab - 1))] = mid;
  }
  return l;
}

TEST(SamplingRef, argmax_row_is_the_host_argmax_with_ties_inf_and_nan) {
  Rng rng(1);
  SCOPED_TRACE(test::seed_note());
  for (int64_t vocab : {1, 2, 31, 32, 33, 769, 5125}) {
    for (int trial = 0; trial < 20; ++trial) {
      const auto l = awkward_logits(rng, vocab, 2.0f);
      EXPECT_EQ(ops::ref::argmax_row(l), argmax(l)) << "vocab " << vocab;
    }
  }
  const std::vector<float> none = {-INFINITY, NAN, -INFINITY};
  EXPECT_EQ(ops::ref::argmax_row(none), 0);
  EXPECT_EQ(argmax(none), 0);
  const std::vector<float> nan_first = {NAN, 1.0f, 3.0f, 3.0f};
  EXPECT_EQ(ops::ref::argmax_row(nan_first), 2);
}

// Same seed, same configuration: the reference at the Sampler's uniforms draws what the Sampler draws.
TEST(SamplingRef, sample_row_draws_what_the_sampler_draws_at_its_uniforms) {
  Rng rng(2);
  SCOPED_TRACE(test::seed_note());
  const ops::RowSampling configs[] = {
      {1.0f, 1.0f, 0, 0.0f}, {0.7f, 0.9f, 0, 0.0f},     {1.3f, 1.0f, 40, 0.0f}, {1.0f, 0.5f, 5, 0.05f},
      {0.8f, 1.0f, 0, 0.1f}, {2.0f, 0.95f, 1000, 0.0f}, {1.0f, 1.0f, 1, 0.0f},  {1.0f, 1.0f, 100000, 0.0f},
  };
  for (int64_t vocab : {1, 33, 769, 5125}) {
    for (const auto& c : configs) {
      SamplingParams p;
      p.temperature = c.temperature;
      p.top_p = c.top_p;
      p.top_k = c.top_k;
      p.min_p = c.min_p;
      p.seed = static_cast<uint64_t>(rng.integer(0, 1 << 30));
      Sampler host(p), stream(p);
      const auto base = awkward_logits(rng, vocab, 3.0f);
      for (int draw = 0; draw < 50; ++draw) {
        auto l = base;
        const int32_t want = host.sample(l, RecentTokens());
        EXPECT_EQ(ops::ref::sample_row(base, c, stream.uniform()), want)
            << "vocab " << vocab << " T " << c.temperature << " top_p " << c.top_p << " top_k " << c.top_k << " min_p " << c.min_p;
      }
    }
  }
}

TEST(SamplingRef, a_row_without_finite_logits_gives_token_zero) {
  const std::vector<float> l = {-INFINITY, NAN, -INFINITY, -INFINITY};
  for (const ops::RowSampling c : {ops::RowSampling{1.0f, 1.0f, 0, 0.0f}, ops::RowSampling{1.0f, 0.9f, 2, 0.1f}}) {
    EXPECT_EQ(ops::ref::sample_row(l, c, 0.99), 0);
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_p = c.top_p;
    p.top_k = c.top_k;
    p.min_p = c.min_p;
    Sampler s(p);
    auto copy = l;
    EXPECT_EQ(s.sample(copy, RecentTokens()), 0);
  }
}

TEST(SamplingRef, nan_logits_are_never_sampled) {
  std::vector<float> l = {NAN, 0.0f, NAN, 0.0f};
  for (double u : {0.0, 0.3, 0.6, 0.999}) {
    const int32_t t = ops::ref::sample_row(l, {1.0f, 1.0f, 0, 0.0f}, u);
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
}

TEST(SamplingOps, cpu_tensors_use_the_reference) {
  Rng rng(3);
  const int64_t rows = 5, vocab = 77;
  Tensor logits = Tensor::zeros({rows, vocab}, DType::f32);
  test::fill_normal(logits, rng, 2.0f);
  Tensor ids = Tensor::zeros({rows}, DType::i32);
  ops::argmax_rows(logits, ids);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(ids.data<int32_t>()[r], argmax({logits.data<float>() + r * vocab, static_cast<size_t>(vocab)}));
  const std::vector<double> u = {0.1, 0.5, 0.9, 0.0, 0.75};
  const ops::RowSampling s{0.9f, 0.8f, 10, 0.0f};
  ops::sample_rows(logits, s, u, ids);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(ids.data<int32_t>()[r],
              ops::ref::sample_row({logits.data<float>() + r * vocab, static_cast<size_t>(vocab)}, s, u[static_cast<size_t>(r)]));
}

TEST(SamplingOps, bad_arguments_name_the_op) {
  Tensor logits = Tensor::zeros({2, 10}, DType::f32);
  Tensor ids = Tensor::zeros({2}, DType::i32);
  const std::vector<double> u = {0.1, 0.2};
  EXPECT_THROW(ops::sample_rows(logits, {0.0f, 1.0f, 0, 0.0f}, u, ids), Error);
  EXPECT_THROW(ops::sample_rows(logits, {1.0f, 1.0f, 0, 0.0f}, std::vector<double>{0.1}, ids), Error);
  EXPECT_THROW(ops::sample_rows(logits, {1.0f, 1.0f, 0, 0.0f}, std::vector<double>{0.1, 1.0}, ids), Error);
  Tensor wrong = Tensor::zeros({3}, DType::i32);
  try {
    ops::argmax_rows(logits, wrong);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[argmax_rows]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sanctum

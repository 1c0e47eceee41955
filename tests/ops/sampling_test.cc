// The token-selection ops' scalar twins (ops/ref/sampling.h) against the host Sampler they mirror,
// and the ops' CPU dispatch. The GPU side is tests/gpu/cuda_sampling_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <utility>
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

// The vectorised greedy pick (ops::argmax_row, the CPU's argmax_rows) against the scalar twin, on
// rows of odd lengths around the vector widths and Qwen's vocab, with the maximum planted at a
// vector's first and last lane, in the tail, and tied across lanes and vectors; NaN and -inf
// everywhere, and masks that are full, empty, sparse, random and shorter than the row.
TEST(SamplingOps, vectorised_argmax_is_the_reference_with_planted_ties_nan_and_masks) {
  Rng rng(5);
  SCOPED_TRACE(test::seed_note());
  for (int64_t vocab : {1, 3, 15, 16, 17, 31, 33, 63, 65, 769, 5125, 151936}) {
    const int trials = vocab > 10000 ? 4 : 40;
    for (int trial = 0; trial < trials; ++trial) {
      std::vector<float> l = awkward_logits(rng, vocab, 2.0f);
      const float top = *std::max_element(l.begin(), l.end(), [](float a, float b) { return a < b || std::isnan(a); }) + 1.0f;
      switch (trial % 5) {
        case 0:  // one maximum at a lane boundary, a later tie in another vector
          l[static_cast<size_t>(std::min<int64_t>(vocab - 1, 16 * rng.integer(0, vocab / 16)))] = top;
          l[static_cast<size_t>(vocab - 1)] = top;
          break;
        case 1:  // the maximum in the row's tail only
          l[static_cast<size_t>(vocab - 1)] = top;
          break;
        case 2:  // NaN before and at the maximum's neighbours, and a +0 / -0 maximum
          for (float& x : l) x = std::min(x, -1.0f);
          l[static_cast<size_t>(rng.integer(0, vocab - 1))] = -0.0f;
          l[static_cast<size_t>(rng.integer(0, vocab - 1))] = 0.0f;
          for (int i = 0; i < 5; ++i) l[static_cast<size_t>(rng.integer(0, vocab - 1))] = NAN;
          break;
        case 3:  // nothing above -inf: token 0
          for (float& x : l) x = rng.uniform(0.0f, 1.0f) < 0.5f ? -INFINITY : NAN;
          break;
        default:  // +inf twice
          l[static_cast<size_t>(rng.integer(0, vocab - 1))] = INFINITY;
          l[static_cast<size_t>(rng.integer(0, vocab - 1))] = INFINITY;
          break;
      }
      ASSERT_EQ(ops::argmax_row(l), ops::ref::argmax_row(l)) << "vocab " << vocab << " trial " << trial;
      // the same row under masks, through the op
      const int64_t words = (vocab + 31) / 32;
      for (int kind = 0; kind < 5; ++kind) {
        const int64_t w = kind == 4 ? std::max<int64_t>(1, words / 2) : words;  // kind 4: shorter than the row
        Tensor allowed = Tensor::zeros({1, w}, DType::u32);
        uint32_t* bits = allowed.data<uint32_t>();
        for (int64_t i = 0; i < w; ++i) {
          const uint32_t r = static_cast<uint32_t>(rng.integer(0, UINT32_MAX));
          bits[i] = kind == 0 ? ~0u : kind == 1 ? 0u : kind == 2 ? (rng.uniform(0.0f, 1.0f) < 0.1f ? r & (r >> 7) & (r >> 13) : 0u) : r;
        }
        Tensor logits = Tensor::zeros({1, vocab}, DType::f32), ids = Tensor::zeros({1}, DType::i32);
        std::copy(l.begin(), l.end(), logits.data<float>());
        std::vector<float> masked = l;
        ops::ref::mask_row(masked, {bits, static_cast<size_t>(w)});
        ops::argmax_rows(logits, ids, allowed);
        ASSERT_EQ(ids.data<int32_t>()[0], ops::ref::argmax_row(masked)) << "vocab " << vocab << " trial " << trial << " mask " << kind;
      }
    }
  }
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

// The filtered distribution the plain way: every id sorted (logit descending, then id), softmax,
// min-p, top-p, all in that order. sample_weights sorts only what top-p can keep and sums in id
// order where every id takes part, so the weights may differ in the last bits, never the kept set.
std::vector<float> full_sort_weights(std::span<const float> logits, const ops::RowSampling& s) {
  std::vector<std::pair<float, int32_t>> c;
  for (size_t i = 0; i < logits.size(); ++i)
    c.push_back({(std::isnan(logits[i]) ? -INFINITY : logits[i]) / s.temperature, static_cast<int32_t>(i)});
  std::sort(c.begin(), c.end(),
            [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  if (s.top_k > 0 && static_cast<size_t>(s.top_k) < c.size()) c.resize(static_cast<size_t>(s.top_k));
  const float max_logit = c.front().first;
  double total = 0.0;
  for (auto& [l, id] : c) total += (l = std::exp(l - max_logit));
  for (auto& [l, id] : c) l = static_cast<float>(l / total);
  if (s.min_p > 0.0f)
    while (c.size() > 1 && c.back().first < s.min_p * c.front().first) c.pop_back();
  if (s.top_p < 1.0f) {
    double mass = 0.0;
    size_t n = 0;
    while (n < c.size() && mass < s.top_p) mass += c[n++].first;
    c.resize(n);
  }
  double kept = 0.0;
  for (const auto& [prob, id] : c) kept += prob;
  std::vector<float> p(logits.size(), 0.0f);
  for (const auto& [prob, id] : c) p[static_cast<size_t>(id)] = static_cast<float>(prob / kept);
  return p;
}

TEST(SamplingRef, filters_keep_what_a_full_sort_keeps) {
  Rng rng(5);
  SCOPED_TRACE(test::seed_note());
  const ops::RowSampling configs[] = {
      {0.7f, 0.8f, 0, 0.0f}, {1.0f, 0.1f, 0, 0.0f},   {1.5f, 0.999f, 0, 0.0f}, {0.3f, 0.5f, 0, 0.0f},    {1.0f, 1.0f, 0, 0.05f},
      {1.0f, 0.9f, 0, 0.3f}, {2.0f, 0.95f, 0, 0.01f}, {1.0f, 0.9f, 20, 0.0f},  {0.6f, 0.95f, 20, 0.05f}, {1.0f, 0.9f, 100000, 0.0f},
  };
  for (int64_t vocab : {1, 7, 33, 1000, 50001}) {
    for (float scale : {0.05f, 1.0f, 8.0f}) {  // flat (top-p keeps most ids), ordinary, peaked
      const auto l = awkward_logits(rng, vocab, scale);
      for (const auto& c : configs) {
        const auto got = ops::ref::sample_weights(l, c), want = full_sort_weights(l, c);
        int wrong_set = 0;
        double worst = 0.0;
        for (size_t i = 0; i < got.size(); ++i) {
          wrong_set += (got[i] > 0.0f) != (want[i] > 0.0f);
          worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])) / std::max(want[i], 1e-30f));
        }
        EXPECT_EQ(wrong_set, 0) << "vocab " << vocab << " scale " << scale << " T " << c.temperature << " top_p " << c.top_p << " top_k "
                                << c.top_k << " min_p " << c.min_p;
        EXPECT_LT(worst, 1e-5) << "vocab " << vocab << " scale " << scale << " top_p " << c.top_p << " min_p " << c.min_p;
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
    EXPECT_EQ(ids.data<int32_t>()[r], ops::ref::argmax_row({logits.data<float>() + r * vocab, static_cast<size_t>(vocab)}));
  const std::vector<double> u = {0.1, 0.5, 0.9, 0.0, 0.75};
  const ops::RowSampling s{0.9f, 0.8f, 10, 0.0f};
  ops::sample_rows(logits, s, u, ids);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(ids.data<int32_t>()[r],
              ops::ref::sample_row({logits.data<float>() + r * vocab, static_cast<size_t>(vocab)}, s, u[static_cast<size_t>(r)]));
}

TEST(SamplingRef, mask_row_forbids_clear_bits_and_ids_past_the_words) {
  std::vector<float> row(70, 1.0f);
  const std::vector<uint32_t> allowed = {0x5u, ~0u};  // ids 0, 2, 32..63; 64.. lie past the words
  ops::ref::mask_row(row, allowed);
  for (size_t i = 0; i < row.size(); ++i) {
    const bool kept = i == 0 || i == 2 || (i >= 32 && i < 64);
    EXPECT_EQ(row[i], kept ? 1.0f : -INFINITY) << "id " << i;
  }
}

// The ops' `allowed` on the CPU: each row picked as the reference picks its masked copy, so a pick
// never leaves the mask, and a row whose allowed logits are far below the others still picks one.
TEST(SamplingOps, allowed_masks_each_row_as_mask_row_does) {
  Rng rng(4);
  SCOPED_TRACE(test::seed_note());
  const int64_t rows = 6, vocab = 1000 + 7, words = (vocab + 31) / 32;
  Tensor logits = Tensor::zeros({rows, vocab}, DType::f32);
  test::fill_normal(logits, rng, 3.0f);
  Tensor allowed = Tensor::zeros({rows, words}, DType::u32);
  auto bits = [&](int64_t r) { return std::span<uint32_t>(allowed.data<uint32_t>() + r * words, static_cast<size_t>(words)); };
  for (int64_t i = 0; i < vocab; i += 97) bits(0)[static_cast<size_t>(i / 32)] |= 1u << (i % 32);  // sparse
  bits(1)[17] = 1u << 5;                                                                           // one token
  std::fill(bits(2).begin(), bits(2).end(), ~0u);                                                  // all
  for (int64_t i = 0; i < vocab; ++i) {                                                            // the allowed ones far below the rest
    if (i % 5 == 0) bits(3)[static_cast<size_t>(i / 32)] |= 1u << (i % 32);
    if (i % 5 == 0) logits.data<float>()[3 * vocab + i] -= 200.0f;
  }
  // rows 4 and 5: nothing allowed (token 0), and random words
  for (uint32_t& w : bits(5)) w = static_cast<uint32_t>(rng.integer(0, UINT32_MAX));
  auto masked = [&](int64_t r) {
    std::vector<float> row(logits.data<float>() + r * vocab, logits.data<float>() + (r + 1) * vocab);
    ops::ref::mask_row(row, bits(r));
    return row;
  };
  auto is_allowed = [&](int64_t r, int32_t t) { return (bits(r)[static_cast<size_t>(t / 32)] >> (t % 32)) & 1u; };
  Tensor ids = Tensor::zeros({rows}, DType::i32);
  ops::argmax_rows(logits, ids, allowed);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(ids.data<int32_t>()[r], ops::ref::argmax_row(masked(r))) << "row " << r;
    if (r != 4) {
      EXPECT_TRUE(is_allowed(r, ids.data<int32_t>()[r])) << "row " << r;
    }
  }
  EXPECT_EQ(ids.data<int32_t>()[1], 17 * 32 + 5);
  EXPECT_EQ(ids.data<int32_t>()[4], 0);
  const ops::RowSampling configs[] = {{1.0f, 1.0f, 0, 0.0f}, {0.8f, 0.9f, 0, 0.0f}, {1.2f, 1.0f, 20, 0.05f}};
  for (const auto& s : configs) {
    for (int trial = 0; trial < 10; ++trial) {
      std::vector<double> u(static_cast<size_t>(rows));
      for (double& x : u) x = rng.uniform(0.0f, 0.999f);
      ops::sample_rows(logits, s, u, ids, allowed);
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(ids.data<int32_t>()[r], ops::ref::sample_row(masked(r), s, u[static_cast<size_t>(r)])) << "row " << r;
        if (r != 4) {
          EXPECT_TRUE(is_allowed(r, ids.data<int32_t>()[r])) << "row " << r << " top_p " << s.top_p;
        }
      }
    }
  }
  Tensor short_mask = Tensor::zeros({rows - 1, words}, DType::u32);
  EXPECT_THROW(ops::argmax_rows(logits, ids, short_mask), Error);
  Tensor wrong_type = Tensor::zeros({rows, words}, DType::i32);
  EXPECT_THROW(ops::argmax_rows(logits, ids, wrong_type), Error);
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

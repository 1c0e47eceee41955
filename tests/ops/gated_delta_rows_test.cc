// The GatedDeltaNet decode ops for a batch (one token of each of several sequences, each with its own
// state, in one call) against one-row calls of the single-sequence ops: the same bits for every
// listed row and state, rows outside the list untouched, bad arguments refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/gated_delta.h"

namespace sanctum::ops {
namespace {

// Fresh inputs per run (SANCTUM_TEST_SEED reproduces one); `salt` keeps the tensors of a case apart.
Tensor randn(std::initializer_list<int64_t> shape, uint64_t salt, float scale = 1.0f) {
  test::Rng rng(salt);
  return test::random_tensor(shape, DType::f32, rng, scale);
}

// Bit equality of two 2-D f32 views (rows may be strided).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dim(0) != b.dim(0) || a.dim(1) != b.dim(1)) return false;
  for (int64_t r = 0; r < a.dim(0); ++r)
    if (std::memcmp(a.data<float>() + r * a.stride(0), b.data<float>() + r * b.stride(0), static_cast<size_t>(a.dim(1)) * 4) != 0)
      return false;
  return true;
}

bool same_bits_flat(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.numel()) * 4) == 0;
}

// `count` distinct rows of `n`, in a shuffled order (the op must not assume ascending rows).
std::vector<int64_t> pick_rows(int64_t n, int64_t count, uint64_t seed) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  std::mt19937_64 rng(test::test_seed() ^ seed);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(static_cast<size_t>(count));
  return rows;
}

TEST(GatedDeltaRows, conv_rows_equal_one_row_calls) {
  for (int64_t kernel : {4, 3, 2}) {
    for (int64_t channels : {5, 37, 1001}) {
      for (int64_t count : {1, 2, 5, 9}) {
        SCOPED_TRACE("kernel " + std::to_string(kernel) + " channels " + std::to_string(channels) + " sequences " + std::to_string(count) +
                     " " + test::seed_note());
        const uint64_t seed = static_cast<uint64_t>(kernel * 10000 + channels * 10 + count);
        const int64_t n = count + 3;  // three rows belong to no listed sequence
        // x a strided view, as the block's projections are column slices of one matmul output.
        const Tensor wide = randn({n, channels + 7}, seed);
        const Tensor x = wide.slice(1, 3, 3 + channels);
        const Tensor taps = conv1d_taps(randn({channels, kernel}, seed + 1, 0.5f));
        const std::vector<int64_t> rows = pick_rows(n, count, seed + 2);
        std::vector<Tensor> states, expected_states;
        for (int64_t s = 0; s < count; ++s) {
          states.push_back(randn({kernel - 1, channels}, seed + 10 + static_cast<uint64_t>(s)));
          expected_states.push_back(states.back().clone());
        }
        std::vector<Tensor*> state_ptrs;
        for (Tensor& t : states) state_ptrs.push_back(&t);
        Tensor out = Tensor::zeros({n, channels}, DType::f32), expected = out.clone();
        causal_conv1d_silu_taps_rows(x, rows, state_ptrs, taps, out);
        for (int64_t s = 0; s < count; ++s) {
          const int64_t r = rows[static_cast<size_t>(s)];
          Tensor o = expected.slice(0, r, r + 1);
          causal_conv1d_silu_taps(x.slice(0, r, r + 1), expected_states[static_cast<size_t>(s)], taps, o);
          EXPECT_TRUE(same_bits_flat(states[static_cast<size_t>(s)], expected_states[static_cast<size_t>(s)])) << "state of row " << r;
        }
        EXPECT_TRUE(same_bits(out, expected));  // unlisted rows stay zero on both sides
      }
    }
  }
}

struct RuleInputs {
  Tensor qkv, q, k, v, a, b, a_log, dt_bias;
};

RuleInputs make_rule_inputs(const GatedDeltaShape& s, int64_t n, uint64_t seed) {
  RuleInputs in;
  const int64_t kd = s.n_key_heads * s.key_dim, vd = s.n_value_heads * s.value_dim;
  in.qkv = randn({n, 2 * kd + vd}, seed);  // q, k and v as column slices of one tensor, as the block has them
  in.q = in.qkv.slice(1, 0, kd);
  in.k = in.qkv.slice(1, kd, 2 * kd);
  in.v = in.qkv.slice(1, 2 * kd, 2 * kd + vd);
  in.a = randn({n, s.n_value_heads}, seed + 1);
  in.b = randn({n, s.n_value_heads}, seed + 2);
  in.a_log = Tensor::zeros({s.n_value_heads}, DType::f32);
  test::Rng rng(seed + 3);
  for (int64_t h = 0; h < s.n_value_heads; ++h) in.a_log.data<float>()[h] = std::log(rng.uniform(0.01f, 16.0f));
  in.dt_bias = randn({s.n_value_heads}, seed + 4, 0.5f);
  return in;
}

TEST(GatedDeltaRows, rule_rows_equal_one_row_calls) {
  const GatedDeltaShape configs[] = {{2, 32, 2, 32}, {2, 24, 6, 40}, {1, 128, 3, 128}, {2, 16, 4, 8}};
  for (const GatedDeltaShape& s : configs) {
    for (int64_t count : {1, 2, 3, 8}) {
      SCOPED_TRACE("Dk " + std::to_string(s.key_dim) + " Hv " + std::to_string(s.n_value_heads) + " Dv " + std::to_string(s.value_dim) +
                   " sequences " + std::to_string(count) + " " + test::seed_note());
      const uint64_t seed = static_cast<uint64_t>(s.key_dim * 1000 + s.value_dim * 10 + count);
      const int64_t n = count + 2;
      const RuleInputs in = make_rule_inputs(s, n, seed);
      const std::vector<int64_t> rows = pick_rows(n, count, seed + 5);
      std::vector<Tensor> states, expected_states;
      for (int64_t i = 0; i < count; ++i) {
        states.push_back(randn({s.n_value_heads, s.value_dim, s.key_dim}, seed + 20 + static_cast<uint64_t>(i), 0.5f));
        expected_states.push_back(states.back().clone());
      }
      std::vector<Tensor*> state_ptrs;
      for (Tensor& t : states) state_ptrs.push_back(&t);
      Tensor out = Tensor::zeros({n, s.n_value_heads * s.value_dim}, DType::f32), expected = out.clone();
      gated_delta_rule_rows(in.q, in.k, in.v, in.a, in.b, in.a_log, in.dt_bias, s, rows, state_ptrs, out);
      for (int64_t i = 0; i < count; ++i) {
        const int64_t r = rows[static_cast<size_t>(i)];
        Tensor o = expected.slice(0, r, r + 1);
        gated_delta_rule(in.q.slice(0, r, r + 1), in.k.slice(0, r, r + 1), in.v.slice(0, r, r + 1), in.a.slice(0, r, r + 1),
                         in.b.slice(0, r, r + 1), in.a_log, in.dt_bias, s, expected_states[static_cast<size_t>(i)], o,
                         GatedDeltaAlgorithm::sequential);
        EXPECT_TRUE(same_bits_flat(states[static_cast<size_t>(i)], expected_states[static_cast<size_t>(i)])) << "state of row " << r;
      }
      EXPECT_TRUE(same_bits(out, expected));
    }
  }
}

void expect_error(const std::function<void()>& f, const char* what) { test::expect_error_naming(f, "_rows]", what); }

TEST(GatedDeltaRows, bad_arguments_throw) {
  const GatedDeltaShape s{2, 16, 4, 8};
  const RuleInputs in = make_rule_inputs(s, 4, 7);
  Tensor s0 = randn({4, 8, 16}, 1), s1 = randn({4, 8, 16}, 2), wrong = randn({4, 16, 8}, 3);
  Tensor out = Tensor::zeros({4, 32}, DType::f32);
  auto rule = [&](std::vector<int64_t> rows, std::vector<Tensor*> states) {
    gated_delta_rule_rows(in.q, in.k, in.v, in.a, in.b, in.a_log, in.dt_bias, s, rows, states, out);
  };
  expect_error([&] { rule({0, 1}, {&s0}); }, "fewer states than rows");
  expect_error([&] { rule({0, 0}, {&s0, &s1}); }, "a row twice");
  expect_error([&] { rule({0, 4}, {&s0, &s1}); }, "a row out of range");
  expect_error([&] { rule({0, -1}, {&s0, &s1}); }, "a negative row");
  expect_error([&] { rule({0, 1}, {&s0, &s0}); }, "one state for two rows");
  expect_error([&] { rule({0, 1}, {&s0, nullptr}); }, "a null state");
  expect_error([&] { rule({0, 1}, {&s0, &wrong}); }, "a state of the wrong shape");
  Tensor short_out = Tensor::zeros({3, 32}, DType::f32);
  expect_error(
      [&] {
        gated_delta_rule_rows(in.q, in.k, in.v, in.a, in.b, in.a_log, in.dt_bias, s, std::vector<int64_t>{0}, std::vector<Tensor*>{&s0},
                              short_out);
      },
      "out with fewer rows than q");

  const Tensor x = randn({3, 10}, 4);
  const Tensor taps = conv1d_taps(randn({10, 4}, 5));
  Tensor c0 = randn({3, 10}, 6), c1 = randn({3, 10}, 7), c_wrong = randn({2, 10}, 8);
  Tensor conv_out = Tensor::zeros({3, 10}, DType::f32);
  auto conv = [&](std::vector<int64_t> rows, std::vector<Tensor*> states) {
    causal_conv1d_silu_taps_rows(x, rows, states, taps, conv_out);
  };
  expect_error([&] { conv({0, 1}, {&c0}); }, "conv: fewer states than rows");
  expect_error([&] { conv({1, 1}, {&c0, &c1}); }, "conv: a row twice");
  expect_error([&] { conv({0, 3}, {&c0, &c1}); }, "conv: a row out of range");
  expect_error([&] { conv({0, 1}, {&c1, &c1}); }, "conv: one state for two rows");
  expect_error([&] { conv({0, 1}, {&c0, &c_wrong}); }, "conv: a state of the wrong shape");
  expect_error([&] { causal_conv1d_silu_taps_rows(x, std::vector<int64_t>{0}, std::vector<Tensor*>{&c0}, taps, const_cast<Tensor&>(x)); },
               "conv: out aliasing x");
}

}  // namespace
}  // namespace sanctum::ops

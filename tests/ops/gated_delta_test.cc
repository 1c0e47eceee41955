// GatedDeltaNet ops: the Highway kernels against the scalar references, the chunked form against the
// token-by-token recurrence, state continuity across calls, argument checks, and (disabled by
// default) timings at the Qwen3.5 shapes.
#include "ops/gated_delta.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "op_test_util.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/precision.h"
#include "ops/ref/gated_delta.h"
#include "tensor/dtype.h"

namespace sanctum::ops {
namespace {

Tensor randn(std::initializer_list<int64_t> shape, uint64_t seed, float scale = 1.0f) {
  Tensor t = Tensor::zeros(shape, DType::f32);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

Tensor to_bf16(const Tensor& t) {
  const int64_t n = t.numel();
  Tensor out = Tensor::zeros({n}, DType::bf16);
  for (int64_t i = 0; i < n; ++i) out.data<uint16_t>()[i] = f32_to_bf16(t.data<float>()[i]);
  if (t.ndim() == 2) return out.reshape({t.dim(0), t.dim(1)});
  return out;
}

// Elements of a (possibly row-strided) 2-D f32 view, row-major.
std::vector<float> values(const Tensor& t) {
  std::vector<float> out;
  if (t.ndim() <= 1 || t.is_contiguous()) {
    const float* p = t.data<float>();
    out.assign(p, p + t.numel());
    return out;
  }
  for (int64_t r = 0; r < t.dim(0); ++r)
    for (int64_t c = 0; c < t.dim(1); ++c) out.push_back(t.data<float>()[r * t.stride(0) + c]);
  return out;
}

// max |a - b| / max |b| (b is the truth).
double rel_diff(const Tensor& a, const Tensor& b) {
  const auto va = values(a), vb = values(b);
  EXPECT_EQ(va.size(), vb.size());
  double diff = 0.0, mag = 1e-30;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(va[i] - vb[i])));
    mag = std::max(mag, static_cast<double>(std::fabs(vb[i])));
    if (!std::isfinite(va[i])) return INFINITY;
  }
  return diff / mag;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = values(a), vb = values(b);
  double diff = 0.0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(va[i] - vb[i])));
  return diff;
}

// ---------------------------------------------------------------- conv

TEST(CausalConv1dSilu, matches_reference) {
  for (int64_t kernel : {4, 3}) {
    for (int64_t channels : {5, 37, 1001, 6144}) {
      for (int64_t n : {1, 2, 3, 7, 64}) {
        for (bool bf16 : {false, true}) {
          SCOPED_TRACE("kernel " + std::to_string(kernel) + " channels " + std::to_string(channels) + " n " + std::to_string(n) +
                       (bf16 ? " bf16" : " f32"));
          const uint64_t seed = static_cast<uint64_t>(kernel * 100000 + channels * 100 + n);
          const Tensor x = randn({n, channels}, seed);
          Tensor w = randn({channels, kernel}, seed + 1, 0.5f);
          if (bf16) w = to_bf16(w);
          Tensor state = randn({kernel - 1, channels}, seed + 2);
          Tensor state_ref = state.clone();
          Tensor out = Tensor::zeros({n, channels}, DType::f32), out_ref = out.clone();
          Tensor state_taps = state.clone(), out_taps = out.clone();
          causal_conv1d_silu(x, state, w, out);
          ref::causal_conv1d_silu(x, state_ref, w, out_ref);
          EXPECT_LT(max_abs_diff(out, out_ref), 1e-5);
          EXPECT_EQ(max_abs_diff(state, state_ref), 0.0);
          // The pre-arranged weight gives the same bits as the per-call conversion.
          causal_conv1d_silu_taps(x, state_taps, conv1d_taps(w), out_taps);
          EXPECT_EQ(max_abs_diff(out_taps, out), 0.0);
          EXPECT_EQ(max_abs_diff(state_taps, state), 0.0);
        }
      }
    }
  }
}

TEST(CausalConv1dSilu, rolling_state_equals_one_call) {
  const int64_t channels = 1001, kernel = 4;
  const Tensor w = randn({channels, kernel}, 7, 0.5f);
  const Tensor x = randn({12, channels}, 8);
  Tensor state_one = Tensor::zeros({kernel - 1, channels}, DType::f32);
  Tensor out_one = Tensor::zeros({12, channels}, DType::f32);
  causal_conv1d_silu(x, state_one, w, out_one);
  // Pieces of 1, 2 (shorter than the history), 1, 5, 3 tokens.
  Tensor state = Tensor::zeros({kernel - 1, channels}, DType::f32);
  Tensor out = Tensor::zeros({12, channels}, DType::f32);
  int64_t t = 0;
  for (int64_t piece : {1, 2, 1, 5, 3}) {
    Tensor o = out.slice(0, t, t + piece);
    causal_conv1d_silu(x.slice(0, t, t + piece), state, w, o);
    t += piece;
  }
  EXPECT_EQ(max_abs_diff(out, out_one), 0.0);
  EXPECT_EQ(max_abs_diff(state, state_one), 0.0);
}

TEST(CausalConv1dSilu, strided_rows) {
  const int64_t channels = 70, kernel = 4, n = 9;
  const Tensor wide = randn({n, channels + 30}, 11);
  const Tensor x = wide.slice(1, 10, 10 + channels);
  const Tensor w = randn({channels, kernel}, 12, 0.5f);
  Tensor state = randn({kernel - 1, channels}, 13), state_ref = state.clone();
  Tensor out_wide = Tensor::zeros({n, channels + 5}, DType::f32);
  Tensor out = out_wide.slice(1, 5, 5 + channels);
  Tensor out_ref = Tensor::zeros({n, channels}, DType::f32);
  causal_conv1d_silu(x, state, w, out);
  ref::causal_conv1d_silu(x, state_ref, w, out_ref);
  EXPECT_LT(max_abs_diff(out, out_ref), 1e-5);
  EXPECT_EQ(max_abs_diff(state, state_ref), 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(out_wide.data<float>()[r * (channels + 5) + c], 0.0f);
}

// ---------------------------------------------------------------- gated delta rule

struct Inputs {
  Tensor q, k, v, a, b, a_log, dt_bias, state;
  GatedDeltaShape shape;
};

// Realistic magnitudes: A_log = log(uniform(0, 16)), a, b, q, k, v ~ N(0, 1), a non-zero state.
Inputs make_inputs(const GatedDeltaShape& s, int64_t n, uint64_t seed) {
  Inputs in;
  in.shape = s;
  in.q = randn({n, s.n_key_heads * s.key_dim}, seed + 1);
  in.k = randn({n, s.n_key_heads * s.key_dim}, seed + 2);
  in.v = randn({n, s.n_value_heads * s.value_dim}, seed + 3);
  in.a = randn({n, s.n_value_heads}, seed + 4);
  in.b = randn({n, s.n_value_heads}, seed + 5);
  in.a_log = Tensor::zeros({s.n_value_heads}, DType::f32);
  std::mt19937_64 rng(seed + 6);
  std::uniform_real_distribution<float> u(0.01f, 16.0f);
  for (int64_t h = 0; h < s.n_value_heads; ++h) in.a_log.data<float>()[h] = std::log(u(rng));
  in.dt_bias = randn({s.n_value_heads}, seed + 7, 0.5f);
  in.state = randn({s.n_value_heads, s.value_dim, s.key_dim}, seed + 8, 0.5f);
  return in;
}

// Runs the op (or the reference) on rows [t0, t1) of `in`, with `state`, into out rows [t0, t1).
void run(const Inputs& in, Tensor& state, Tensor& out, int64_t t0, int64_t t1, int algorithm) {
  const Tensor q = in.q.slice(0, t0, t1), k = in.k.slice(0, t0, t1), v = in.v.slice(0, t0, t1), a = in.a.slice(0, t0, t1),
               b = in.b.slice(0, t0, t1);
  Tensor o = out.slice(0, t0, t1);
  if (algorithm < 0) ref::gated_delta_rule(q, k, v, a, b, in.a_log, in.dt_bias, in.shape, state, o);
  else gated_delta_rule(q, k, v, a, b, in.a_log, in.dt_bias, in.shape, state, o, static_cast<GatedDeltaAlgorithm>(algorithm));
}

constexpr int kRef = -1;
constexpr int kAuto = static_cast<int>(GatedDeltaAlgorithm::automatic);
constexpr int kSeq = static_cast<int>(GatedDeltaAlgorithm::sequential);
constexpr int kChunk = static_cast<int>(GatedDeltaAlgorithm::chunked);

const GatedDeltaShape kConfigs[] = {
    {2, 32, 2, 32},    // Hv = Hk
    {2, 24, 6, 40},    // Hv = 3 Hk; Dk, Dv not multiples of the vector width
    {1, 128, 3, 128},  // full-size heads, GQA
    {2, 16, 4, 8},     // tiny heads
};

std::string name(const GatedDeltaShape& s, int64_t n) {
  return "Hk " + std::to_string(s.n_key_heads) + " Dk " + std::to_string(s.key_dim) + " Hv " + std::to_string(s.n_value_heads) + " Dv " +
         std::to_string(s.value_dim) + " n " + std::to_string(n);
}

// `algorithm` over all n tokens from the inputs' state against the reference: output and final state
// within `tolerance` (relative).
void expect_near_reference(const Inputs& in, const GatedDeltaShape& s, int64_t n, int algorithm, double tolerance) {
  Tensor state = in.state.clone(), state_ref = in.state.clone();
  Tensor out = Tensor::zeros({n, s.n_value_heads * s.value_dim}, DType::f32), out_ref = out.clone();
  run(in, state, out, 0, n, algorithm);
  run(in, state_ref, out_ref, 0, n, kRef);
  EXPECT_LT(rel_diff(out, out_ref), tolerance);
  EXPECT_LT(rel_diff(state.reshape({-1}), state_ref.reshape({-1})), tolerance);
}

TEST(GatedDeltaRule, sequential_matches_reference) {
  for (const auto& s : kConfigs) {
    for (int64_t n : {1, 2, 17, 63, 200}) {
      SCOPED_TRACE(name(s, n));
      expect_near_reference(make_inputs(s, n, static_cast<uint64_t>(n * 31 + s.key_dim)), s, n, kSeq, 1e-5);
    }
  }
}

TEST(GatedDeltaRule, chunked_matches_sequential_recurrence) {
  for (const auto& s : kConfigs) {
    for (int64_t n : {1, 2, 63, 64, 65, 200, 1000}) {
      SCOPED_TRACE(name(s, n));
      expect_near_reference(make_inputs(s, n, static_cast<uint64_t>(n * 17 + s.value_dim)), s, n, kChunk, 1e-4);
    }
  }
}

TEST(GatedDeltaRule, chunked_split_over_key_or_value_heads_gives_the_same_bits) {
  // The chunked kernel splits work over key heads (sharing their K K^T and Q K^T between value
  // heads) when there are at least as many as threads, else over value heads. One call with two key
  // heads and one call per key head (a single key head: split over value heads whenever there are
  // two or more threads) must give the same bits.
  const GatedDeltaShape s{2, 40, 6, 24}, one{1, 40, 3, 24};
  const int64_t n = 150, g = 3;
  const Inputs in = make_inputs(s, n, 77);
  Tensor state = in.state.clone(), out = Tensor::zeros({n, s.n_value_heads * s.value_dim}, DType::f32);
  run(in, state, out, 0, n, kChunk);
  Tensor state2 = in.state.clone(), out2 = out.clone();
  for (int64_t j = 0; j < 2; ++j) {
    Tensor st = state2.slice(0, j * g, (j + 1) * g), o = out2.slice(1, j * g * 24, (j + 1) * g * 24);
    gated_delta_rule(in.q.slice(1, j * 40, (j + 1) * 40), in.k.slice(1, j * 40, (j + 1) * 40), in.v.slice(1, j * g * 24, (j + 1) * g * 24),
                     in.a.slice(1, j * g, (j + 1) * g), in.b.slice(1, j * g, (j + 1) * g), in.a_log.slice(0, j * g, (j + 1) * g),
                     in.dt_bias.slice(0, j * g, (j + 1) * g), one, st, o, GatedDeltaAlgorithm::chunked);
  }
  EXPECT_EQ(max_abs_diff(out2, out), 0.0);
  EXPECT_EQ(max_abs_diff(state2.reshape({-1}), state.reshape({-1})), 0.0);
}

TEST(GatedDeltaRule, zero_initial_state_and_slow_decay) {
  // Decay close to 1 (A_log very negative) lets the state grow over many tokens: the hard case for
  // the chunked form's cancellation.
  const GatedDeltaShape s{2, 64, 4, 64};
  const int64_t n = 300;
  Inputs in = make_inputs(s, n, 99);
  for (int64_t h = 0; h < s.n_value_heads; ++h) in.a_log.data<float>()[h] = -8.0f;
  std::fill(in.state.data<float>(), in.state.data<float>() + in.state.numel(), 0.0f);
  expect_near_reference(in, s, n, kChunk, 1e-4);
}

TEST(GatedDeltaRule, two_calls_equal_one) {
  for (const auto& s : kConfigs) {
    const int64_t n = 150;
    for (int64_t split : {1, 63, 64, 100}) {
      SCOPED_TRACE(name(s, n) + " split " + std::to_string(split));
      const Inputs in = make_inputs(s, n, static_cast<uint64_t>(split));
      Tensor out_ref = Tensor::zeros({n, s.n_value_heads * s.value_dim}, DType::f32);
      Tensor state_ref = in.state.clone();
      run(in, state_ref, out_ref, 0, n, kRef);
      // Sequential kernel: split calls are bit-identical to one call (and to token-by-token decode).
      Tensor out1 = out_ref.clone(), state1 = in.state.clone();
      run(in, state1, out1, 0, n, kSeq);
      Tensor out2 = out_ref.clone(), state2 = in.state.clone();
      run(in, state2, out2, 0, split, kSeq);
      run(in, state2, out2, split, n, kSeq);
      EXPECT_EQ(max_abs_diff(out1, out2), 0.0);
      EXPECT_EQ(max_abs_diff(state1.reshape({-1}), state2.reshape({-1})), 0.0);
      // Chunked prefill of the first part, then the rest chunked or (for the longer first parts, to
      // keep the test quick) token by token as decode does.
      for (int rest : {kChunk, kSeq, kAuto}) {
        if (rest == kSeq && split < 100) continue;
        Tensor out3 = out_ref.clone(), state3 = in.state.clone();
        run(in, state3, out3, 0, split, kChunk);
        if (rest == kSeq) {
          for (int64_t t = split; t < n; ++t) run(in, state3, out3, t, t + 1, kSeq);
        } else {
          run(in, state3, out3, split, n, rest);
        }
        EXPECT_LT(rel_diff(out3, out_ref), 1e-4);
        EXPECT_LT(rel_diff(state3.reshape({-1}), state_ref.reshape({-1})), 1e-4);
      }
    }
  }
}

TEST(GatedDeltaRule, automatic_picks_sequential_for_decode_and_chunked_for_prompts) {
  const GatedDeltaShape s{2, 32, 4, 32};
  for (int64_t n : {1, 5, 200}) {
    const Inputs in = make_inputs(s, n, 5);
    Tensor out_auto = Tensor::zeros({n, s.n_value_heads * s.value_dim}, DType::f32), state_auto = in.state.clone();
    run(in, state_auto, out_auto, 0, n, kAuto);
    Tensor out_x = out_auto.clone(), state_x = in.state.clone();
    run(in, state_x, out_x, 0, n, n >= 64 ? kChunk : kSeq);
    EXPECT_EQ(max_abs_diff(out_auto, out_x), 0.0) << n;
    EXPECT_EQ(max_abs_diff(state_auto.reshape({-1}), state_x.reshape({-1})), 0.0) << n;
  }
}

TEST(GatedDeltaRule, strided_inputs_and_half_precision_parameters) {
  // q, k, v, a, b as column slices of one fused projection output, as the model produces them.
  const GatedDeltaShape s{2, 24, 4, 40};
  const int64_t n = 70, qk = s.n_key_heads * s.key_dim, vd = s.n_value_heads * s.value_dim, hv = s.n_value_heads;
  const Inputs in = make_inputs(s, n, 21);
  Tensor fused = Tensor::zeros({n, 2 * qk + vd + 2 * hv + 3}, DType::f32);
  auto put = [&](const Tensor& src, int64_t col) {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < src.dim(1); ++c) fused.data<float>()[r * fused.dim(1) + col + c] = src.data<float>()[r * src.dim(1) + c];
    return fused.slice(1, col, col + src.dim(1));
  };
  const Tensor q = put(in.q, 0), k = put(in.k, qk), v = put(in.v, 2 * qk), a = put(in.a, 2 * qk + vd), b = put(in.b, 2 * qk + vd + hv);
  const Tensor a_log16 = to_bf16(in.a_log), dt16 = to_bf16(in.dt_bias);
  for (auto algorithm : {GatedDeltaAlgorithm::sequential, GatedDeltaAlgorithm::chunked}) {
    Tensor state = in.state.clone(), state_ref = in.state.clone();
    Tensor out = Tensor::zeros({n, vd}, DType::f32), out_ref = out.clone();
    gated_delta_rule(q, k, v, a, b, a_log16, dt16, s, state, out, algorithm);
    ref::gated_delta_rule(in.q, in.k, in.v, in.a, in.b, a_log16, dt16, s, state_ref, out_ref);
    EXPECT_LT(rel_diff(out, out_ref), 1e-4);
    EXPECT_LT(rel_diff(state.reshape({-1}), state_ref.reshape({-1})), 1e-4);
  }
}

// ---------------------------------------------------------------- fast matmul mode
// With ops::matmul_precision() other than f32, the chunked kernel runs its products (all but the
// triangular solve) with bf16 operands and f32 accumulation where the CPU has AVX512_BF16; the state
// stays f32. Elsewhere the fast mode runs the f32 kernel.

// Sets the fast mode for a scope.
class FastMode {
 public:
  FastMode() : saved_(matmul_precision()) { set_matmul_precision(MatmulPrecision::int8); }
  ~FastMode() { set_matmul_precision(saved_); }
  FastMode(const FastMode&) = delete;
  FastMode& operator=(const FastMode&) = delete;

 private:
  MatmulPrecision saved_;
};

// Against the f32 token-by-token recurrence. A bf16 operand is within 2^-9 = 2.0e-3 (relative) of
// its f32 value, so a dot product of terms with mixed signs (S q, S k, k.q) is off by about 2^-9 of
// its own size (RMS), and the largest of thousands of such errors by a few times that: measured
// 1.4e-3 to 1.0e-2 of the largest output and 1.9e-3 to 6.3e-3 of the largest state value over these
// shapes and up to 1000 tokens (the state error does not grow with the token count: the delta rule
// pulls each chunk's state back towards v). 2e-2 is 10 bf16 units: it catches a wrong operand or a
// lost term (errors of O(1)) and is the same order as the int8 mode's own matmul error (1/254 of a
// group's largest activation per value).
constexpr double kFastTolerance = 2e-2;

TEST(GatedDeltaRule, fast_mode_chunked_matches_sequential_recurrence) {
  const FastMode fast;
  for (const auto& s : kConfigs) {
    for (int64_t n : {1, 2, 63, 64, 65, 200, 1000}) {
      SCOPED_TRACE(name(s, n));
      expect_near_reference(make_inputs(s, n, static_cast<uint64_t>(n * 13 + s.value_dim)), s, n, kChunk, kFastTolerance);
    }
  }
}

TEST(GatedDeltaRule, fast_mode_zero_initial_state_and_slow_decay) {
  // As zero_initial_state_and_slow_decay: the state grows over many tokens with little decay.
  const FastMode fast;
  const GatedDeltaShape s{2, 128, 4, 128};
  const int64_t n = 600;
  Inputs in = make_inputs(s, n, 98);
  for (int64_t h = 0; h < s.n_value_heads; ++h) in.a_log.data<float>()[h] = -8.0f;
  std::fill(in.state.data<float>(), in.state.data<float>() + in.state.numel(), 0.0f);
  expect_near_reference(in, s, n, kChunk, kFastTolerance);
}

TEST(GatedDeltaRule, fast_mode_prefill_in_aligned_pieces_equals_one_prefill) {
  // Chunks sit at absolute positions when a prompt is split at multiples of 64, and the state passes
  // between calls in f32: the pieces give the bits of one call. Then decode (token by token, f32)
  // stays within the tolerance of the reference.
  const FastMode fast;
  for (const auto& s : kConfigs) {
    const int64_t n = 300;
    const Inputs in = make_inputs(s, n, 55);
    Tensor out_one = Tensor::zeros({n, s.n_value_heads * s.value_dim}, DType::f32), state_one = in.state.clone();
    run(in, state_one, out_one, 0, 256, kChunk);
    for (int64_t split : {64, 128, 192}) {
      SCOPED_TRACE(name(s, n) + " split " + std::to_string(split));
      Tensor out = out_one.clone(), state = in.state.clone();
      run(in, state, out, 0, split, kChunk);
      run(in, state, out, split, 256, kChunk);
      EXPECT_EQ(max_abs_diff(out.slice(0, 0, 256), out_one.slice(0, 0, 256)), 0.0);
      EXPECT_EQ(max_abs_diff(state.reshape({-1}), state_one.reshape({-1})), 0.0);
    }
    for (int64_t t = 256; t < n; ++t) run(in, state_one, out_one, t, t + 1, kAuto);
    Tensor out_ref = out_one.clone(), state_ref = in.state.clone();
    run(in, state_ref, out_ref, 0, n, kRef);
    EXPECT_LT(rel_diff(out_one, out_ref), kFastTolerance);
    EXPECT_LT(rel_diff(state_one.reshape({-1}), state_ref.reshape({-1})), kFastTolerance);
  }
}

TEST(GatedDeltaRule, fast_mode_chunks_outer_and_heads_outer_give_the_same_bits) {
  // The fast mode runs chunks outer (inputs gathered per chunk) when a task's states are small, heads
  // outer otherwise; both do the same operations per head. 48 value heads of 128 x 128 in one call
  // (tasks of 24 or 48 heads with up to 2 compute threads) take heads outer; the same heads in calls
  // of 8 take chunks outer.
  if (compute_pool().size() > 2) GTEST_SKIP() << "tasks would be small enough for chunks outer";
  const FastMode fast;
  const GatedDeltaShape s{2, 128, 48, 128}, part{1, 128, 8, 128};
  const int64_t n = 130, g = 8, d = 128;
  const Inputs in = make_inputs(s, n, 91);
  Tensor state = in.state.clone(), out = Tensor::zeros({n, s.n_value_heads * d}, DType::f32);
  run(in, state, out, 0, n, kChunk);
  Tensor state2 = in.state.clone(), out2 = Tensor::zeros({n, s.n_value_heads * d}, DType::f32);
  for (int64_t j = 0; j < 6; ++j) {
    const int64_t kh = j * g / 24;
    Tensor st = state2.slice(0, j * g, (j + 1) * g), o = out2.slice(1, j * g * d, (j + 1) * g * d);
    gated_delta_rule(in.q.slice(1, kh * d, (kh + 1) * d), in.k.slice(1, kh * d, (kh + 1) * d), in.v.slice(1, j * g * d, (j + 1) * g * d),
                     in.a.slice(1, j * g, (j + 1) * g), in.b.slice(1, j * g, (j + 1) * g), in.a_log.slice(0, j * g, (j + 1) * g),
                     in.dt_bias.slice(0, j * g, (j + 1) * g), part, st, o, GatedDeltaAlgorithm::chunked);
  }
  EXPECT_EQ(max_abs_diff(out2, out), 0.0);
  EXPECT_EQ(max_abs_diff(state2.reshape({-1}), state.reshape({-1})), 0.0);
}

TEST(GatedDeltaRule, chunked_results_do_not_depend_on_scratch_left_by_other_calls) {
  // The chunked kernel keeps its scratch per thread between calls. A call of another shape whose
  // values overflow (inf and NaN left in the scratch) must not change the next call's bits.
  const GatedDeltaShape s{2, 24, 6, 40}, other{1, 128, 3, 128};
  const int64_t n = 150;
  const Inputs in = make_inputs(s, n, 61);
  Inputs bad = make_inputs(other, 200, 62);
  for (Tensor* t : {&bad.q, &bad.k, &bad.v, &bad.state})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] *= 1e38f;
  for (const bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast mode" : "f32");
    const MatmulPrecision saved = matmul_precision();
    if (fast) set_matmul_precision(MatmulPrecision::int8);
    Tensor state = in.state.clone(), out = Tensor::zeros({n, s.n_value_heads * s.value_dim}, DType::f32);
    run(in, state, out, 0, n, kChunk);
    Tensor bad_state = bad.state.clone(), bad_out = Tensor::zeros({200, other.n_value_heads * other.value_dim}, DType::f32);
    run(bad, bad_state, bad_out, 0, 200, kChunk);
    Tensor state2 = in.state.clone(), out2 = Tensor::zeros({n, s.n_value_heads * s.value_dim}, DType::f32);
    run(in, state2, out2, 0, n, kChunk);
    set_matmul_precision(saved);
    EXPECT_EQ(max_abs_diff(out2, out), 0.0);
    EXPECT_EQ(max_abs_diff(state2.reshape({-1}), state.reshape({-1})), 0.0);
  }
}

TEST(GatedDeltaRule, fast_mode_runs_bf16_products_only_where_the_cpu_has_them) {
  const GatedDeltaShape s{2, 128, 4, 128};
  const int64_t n = 130;
  const Inputs in = make_inputs(s, n, 3);
  Tensor out32 = Tensor::zeros({n, s.n_value_heads * s.value_dim}, DType::f32), state32 = in.state.clone();
  run(in, state32, out32, 0, n, kChunk);
  Tensor out16 = out32.clone(), state16 = in.state.clone();
  {
    const FastMode fast;
    run(in, state16, out16, 0, n, kChunk);
  }
  if (cpu::bf16_gemm_available()) {
    EXPECT_GT(max_abs_diff(out16, out32), 0.0);
  } else {
    EXPECT_EQ(max_abs_diff(out16, out32), 0.0);
    EXPECT_EQ(max_abs_diff(state16.reshape({-1}), state32.reshape({-1})), 0.0);
  }
  // The token-by-token kernel (decode) is f32 in every mode.
  Tensor outs = out32.clone(), states = in.state.clone(), outs_fast = out32.clone(), states_fast = in.state.clone();
  run(in, states, outs, 0, 20, kSeq);
  {
    const FastMode fast;
    run(in, states_fast, outs_fast, 0, 20, kSeq);
  }
  EXPECT_EQ(max_abs_diff(outs, outs_fast), 0.0);
  EXPECT_EQ(max_abs_diff(states.reshape({-1}), states_fast.reshape({-1})), 0.0);
}

TEST(GatedDeltaRule, empty_input_is_a_no_op) {
  const GatedDeltaShape s{1, 16, 1, 16};
  const Inputs in = make_inputs(s, 0, 3);
  Tensor state = in.state.clone();
  Tensor out = Tensor::zeros({0, 16}, DType::f32);
  gated_delta_rule(in.q, in.k, in.v, in.a, in.b, in.a_log, in.dt_bias, s, state, out);
  EXPECT_EQ(max_abs_diff(state.reshape({-1}), in.state.reshape({-1})), 0.0);
}

// ---------------------------------------------------------------- gated RMSNorm

TEST(GatedRmsNorm, matches_reference) {
  for (int64_t d : {128, 24, 7}) {
    for (bool bf16 : {false, true}) {
      const int64_t rows = 5, heads = 3;
      const Tensor x = randn({rows, heads * d}, static_cast<uint64_t>(d)), z = randn({rows, heads * d}, 2 * d + 1);
      Tensor w = randn({d}, static_cast<uint64_t>(d) + 3);
      if (bf16) w = to_bf16(w);
      Tensor out = Tensor::zeros({rows, heads * d}, DType::f32), out_ref = out.clone();
      gated_rms_norm(x, z, w, 1e-6f, out);
      ref::gated_rms_norm(x, z, w, 1e-6f, out_ref);
      EXPECT_LT(rel_diff(out, out_ref), 1e-5) << d;
      Tensor inplace = x.clone();
      gated_rms_norm(inplace, z, w, 1e-6f, inplace);
      EXPECT_EQ(max_abs_diff(inplace, out), 0.0) << d;
    }
  }
}

// ---------------------------------------------------------------- argument checks

void expect_error(const std::function<void()>& f, const char* what) { test::expect_error_naming(f, "[", what); }

TEST(GatedDeltaOps, bad_arguments_throw) {
  const GatedDeltaShape s{2, 16, 4, 8};
  const Inputs in = make_inputs(s, 5, 1);
  Tensor state = in.state.clone();
  Tensor out = Tensor::zeros({5, 32}, DType::f32);
  auto call = [&](const GatedDeltaShape& sh, const Tensor& q, Tensor& st, Tensor& o) {
    gated_delta_rule(q, in.k, in.v, in.a, in.b, in.a_log, in.dt_bias, sh, st, o);
  };
  expect_error([&] { call(GatedDeltaShape{3, 16, 4, 8}, in.q, state, out); }, "Hv not a multiple of Hk");
  expect_error([&] { call(GatedDeltaShape{0, 16, 4, 8}, in.q, state, out); }, "zero heads");
  expect_error([&] { call(s, in.q.slice(0, 0, 4), state, out); }, "q rows");
  expect_error([&] { call(s, in.q.slice(1, 0, 16), state, out); }, "q width");
  Tensor bad_state = Tensor::zeros({4, 16, 8}, DType::f32);
  expect_error([&] { call(s, in.q, bad_state, out); }, "state orientation");
  Tensor bad_out = Tensor::zeros({5, 31}, DType::f32);
  expect_error([&] { call(s, in.q, state, bad_out); }, "out width");
  Tensor q16 = to_bf16(in.q);
  expect_error([&] { call(s, q16, state, out); }, "bf16 q");
  Tensor alias = in.v.clone();
  Tensor v_as_out = alias.slice(1, 0, 32);
  expect_error([&] { gated_delta_rule(in.q, in.k, alias, in.a, in.b, in.a_log, in.dt_bias, s, state, v_as_out); }, "out aliasing v");
  const Tensor short_alog = in.a_log.slice(0, 0, 3);
  expect_error([&] { gated_delta_rule(in.q, in.k, in.v, in.a, in.b, short_alog, in.dt_bias, s, state, out); }, "a_log size");

  const Tensor x = randn({4, 10}, 1), w = randn({10, 4}, 2);
  Tensor cstate = Tensor::zeros({3, 10}, DType::f32), cout = Tensor::zeros({4, 10}, DType::f32);
  Tensor wrong_state = Tensor::zeros({4, 10}, DType::f32);
  expect_error([&] { causal_conv1d_silu(x, wrong_state, w, cout); }, "conv state rows");
  const Tensor wrong_w = randn({9, 4}, 3);
  expect_error([&] { causal_conv1d_silu(x, cstate, wrong_w, cout); }, "conv weight rows");
  Tensor xs = x.clone();
  expect_error([&] { causal_conv1d_silu(xs, cstate, w, xs); }, "conv out aliasing x");
  const Tensor taps = conv1d_taps(w);
  expect_error([&] { causal_conv1d_silu_taps(x, cstate, w, cout); }, "taps in (channels, kernel) layout");
  expect_error([&] { causal_conv1d_silu_taps(x, wrong_state, taps, cout); }, "taps conv state rows");

  const Tensor nx = randn({2, 12}, 4), nz = randn({2, 12}, 5), nw = randn({5}, 6);
  Tensor nout = Tensor::zeros({2, 12}, DType::f32);
  expect_error([&] { gated_rms_norm(nx, nz, nw, 1e-6f, nout); }, "norm width not whole heads");
  const Tensor nw4 = randn({4}, 7);
  expect_error([&] { gated_rms_norm(nx, nz, nw4, -1.0f, nout); }, "negative eps");
  const Tensor nz_short = randn({1, 12}, 8);
  expect_error([&] { gated_rms_norm(nx, nz_short, nw4, 1e-6f, nout); }, "z shape");
}

// ---------------------------------------------------------------- timings
// Run with --gtest_also_run_disabled_tests --gtest_filter='*Perf*' (2 compute threads).

// With one compute thread the work runs on the calling thread, and its CPU time is the figure least
// disturbed by other work on a shared machine; with more, wall-clock time.
double now_seconds() {
  if (compute_pool().size() == 1) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best of `rounds` timings of `reps` calls each (the minimum is the figure least disturbed by other
// work), after one warm-up call.
double seconds_per_call(int reps, const std::function<void()>& f, int rounds = 5) {
  f();
  double best = INFINITY;
  for (int round = 0; round < rounds; ++round) {
    const double t0 = now_seconds();
    for (int i = 0; i < reps; ++i) f();
    best = std::min(best, (now_seconds() - t0) / reps);
  }
  return best;
}

// The best time per call of each of `fs`, measured in turns (one call of each per round, after a
// warm-up call each), so that other work on the machine weighs on every variant alike.
std::vector<double> best_in_turns(const std::vector<std::function<void()>>& fs, int rounds) {
  std::vector<double> best(fs.size(), INFINITY);
  for (const auto& f : fs) f();
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < fs.size(); ++i) {
      const double t0 = now_seconds();
      fs[i]();
      best[i] = std::min(best[i], now_seconds() - t0);
    }
  return best;
}

TEST(GatedDeltaPerf, DISABLED_qwen3_5_shapes) {
  const char* threads = std::getenv("SANCTUM_PERF_THREADS");  // default 2, the production seat's count
  set_compute_threads(threads ? std::atoi(threads) : 2);
  struct Case {
    const char* name;
    GatedDeltaShape shape;
  };
  for (const Case& c : {Case{"0.8B (Hk=Hv=16, D=128)", {16, 128, 16, 128}}, Case{"27B (Hk=16, Hv=48, D=128)", {16, 128, 48, 128}}}) {
    const auto& s = c.shape;
    const int64_t n = 2048;
    const Inputs in = make_inputs(s, n, 1);
    Tensor out = Tensor::zeros({n, s.n_value_heads * s.value_dim}, DType::f32);
    Tensor state = in.state.clone();
    // Token by token, chunked in f32, chunked in the fast matmul mode (bf16 products where the CPU
    // has AVX512_BF16).
    const bool bf16 = cpu::bf16_gemm_available();
    const auto times = best_in_turns({[&] { run(in, state, out, 0, n, kSeq); }, [&] { run(in, state, out, 0, n, kChunk); },
                                      [&] {
                                        set_matmul_precision(MatmulPrecision::int8);
                                        run(in, state, out, 0, n, kChunk);
                                        set_matmul_precision(MatmulPrecision::f32);
                                      }},
                                     10);
    const double seq = times[0], chunk = times[1], fast = times[2];
    const double decode = seconds_per_call(200, [&] { run(in, state, out, 0, 1, kSeq); });
    const int64_t conv_dim = 2 * s.n_key_heads * s.key_dim + s.n_value_heads * s.value_dim;
    const Tensor cx = randn({n, conv_dim}, 2), cw = randn({conv_dim, 4}, 3);
    Tensor cstate = Tensor::zeros({3, conv_dim}, DType::f32), cout = Tensor::zeros({n, conv_dim}, DType::f32);
    const Tensor taps = conv1d_taps(cw);
    const double conv = seconds_per_call(3, [&] { causal_conv1d_silu_taps(cx, cstate, taps, cout); });
    Tensor cout1 = cout.slice(0, 0, 1);
    const double conv1 = seconds_per_call(200, [&] { causal_conv1d_silu_taps(cx.slice(0, 0, 1), cstate, taps, cout1); });
    const double conv1w = seconds_per_call(200, [&] { causal_conv1d_silu(cx.slice(0, 0, 1), cstate, cw, cout1); });
    std::printf(
        "%s, %d threads (%s), n=%lld:\n  sequential %.2f us/token (%.1f ms)\n  chunked f32  %.2f us/token (%.1f ms), "
        "%.2fx faster\n  chunked fast %.2f us/token (%.1f ms), %.2fx faster (%s)\n  decode step (n=1) %.1f us/layer\n"
        "  conv1d (taps) %.2f us/token at n=%lld, %.1f us at n=1 (%.1f us converting the weight per call)\n",
        c.name, compute_pool().size(), compute_pool().size() == 1 ? "CPU time" : "wall clock", static_cast<long long>(n), seq / n * 1e6,
        seq * 1e3, chunk / n * 1e6, chunk * 1e3, seq / chunk, fast / n * 1e6, fast * 1e3, seq / fast,
        bf16 ? "bf16 products" : "no AVX512_BF16: f32 products", decode * 1e6, conv / n * 1e6, static_cast<long long>(n), conv1 * 1e6,
        conv1w * 1e6);
  }
}

}  // namespace
}  // namespace sanctum::ops

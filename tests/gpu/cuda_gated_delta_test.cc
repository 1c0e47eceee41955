// The chunked gated delta rule on the GPU (ops/cuda/gated_delta_chunked.cu) against the CPU's
// token-by-token recurrence and its chunked form, on fresh random inputs; and the exactness the
// prompt cache relies on: calls split at multiples of 64 tokens give the same bits as one call.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../ops/op_test_util.h"
#include "gpu_test_util.h"
#include "ops/cuda/gated_delta_chunked.h"
#include "ops/gated_delta.h"

namespace sanctum {
namespace {

using ops::GatedDeltaAlgorithm;
using ops::GatedDeltaShape;
using ops::cuda::ChunkedMath;
using test::gpu;
using test::host;
using test::Rng;

class CudaGatedDelta : public test::RequiresGpu {};

// One call's inputs on the host. q, k and v are column slices of one fused (n, conv_dim) buffer, as
// the GatedDeltaNet block passes them (strided rows).
struct Inputs {
  GatedDeltaShape shape;
  Tensor conv, a, b, a_log, dt_bias, state;
  Tensor q() const { return conv.slice(1, 0, qk_cols()); }
  Tensor k() const { return conv.slice(1, qk_cols(), 2 * qk_cols()); }
  Tensor v() const { return conv.slice(1, 2 * qk_cols(), conv.dim(1)); }
  int64_t qk_cols() const { return shape.n_key_heads * shape.key_dim; }
};

// Decay rates exp(A_log) ~ U(0.01, 16) as Qwen3.5 initialises them, or all exp(fixed_a_log).
Inputs make_inputs(const GatedDeltaShape& s, int64_t n, Rng& rng, float state_scale = 0.5f, float fixed_a_log = NAN) {
  Inputs in;
  in.shape = s;
  in.conv = test::random_tensor({n, 2 * s.n_key_heads * s.key_dim + s.n_value_heads * s.value_dim}, DType::f32, rng);
  in.a = test::random_tensor({n, s.n_value_heads}, DType::f32, rng);
  in.b = test::random_tensor({n, s.n_value_heads}, DType::f32, rng);
  in.a_log = Tensor::zeros({s.n_value_heads}, DType::f32);
  for (int64_t h = 0; h < s.n_value_heads; ++h)
    in.a_log.data<float>()[h] = std::isnan(fixed_a_log) ? std::log(rng.uniform(0.01f, 16.0f)) : fixed_a_log;
  in.dt_bias = test::random_tensor({s.n_value_heads}, DType::bf16, rng, 0.5f);
  in.state = test::random_tensor({s.n_value_heads, s.value_dim, s.key_dim}, DType::f32, rng, state_scale);
  return in;
}

struct Result {
  Tensor out, state;  // on the host
};

// Rows [t0, t1) of `in` through the CPU op from `state` (host tensors, updated in place).
void run_cpu(const Inputs& in, Tensor& state, Tensor& out, int64_t t0, int64_t t1, GatedDeltaAlgorithm algorithm) {
  Tensor o = out.slice(0, t0, t1);
  ops::gated_delta_rule(in.q().slice(0, t0, t1), in.k().slice(0, t0, t1), in.v().slice(0, t0, t1), in.a.slice(0, t0, t1),
                        in.b.slice(0, t0, t1), in.a_log, in.dt_bias, in.shape, state, o, algorithm);
}

Result cpu(const Inputs& in, GatedDeltaAlgorithm algorithm) {
  const int64_t n = in.conv.dim(0);
  Result r{Tensor::zeros({n, in.shape.n_value_heads * in.shape.value_dim}, DType::f32), in.state.clone()};
  run_cpu(in, r.state, r.out, 0, n, algorithm);
  return r;
}

// The GPU over the calls [cuts[i], cuts[i+1]): the chunked kernel directly (math given) or, with
// `algorithm` set, the op's dispatch.
struct GpuRun {
  ChunkedMath math = ChunkedMath::tensor_cores;
  bool through_op = false;
  GatedDeltaAlgorithm algorithm = GatedDeltaAlgorithm::chunked;
};

Result on_gpu(const Inputs& in, const std::vector<int64_t>& cuts, GpuRun how = {}) {
  const int64_t n = in.conv.dim(0);
  Tensor conv = gpu(in.conv), a = gpu(in.a), b = gpu(in.b), a_log = gpu(in.a_log), dt_bias = gpu(in.dt_bias);
  Tensor state = gpu(in.state);
  Tensor out = Tensor::zeros({n, in.shape.n_value_heads * in.shape.value_dim}, DType::f32, Device::cuda);
  const int64_t qk = in.qk_cols();
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const int64_t t0 = cuts[i], t1 = cuts[i + 1];
    Tensor rows = conv.slice(0, t0, t1), o = out.slice(0, t0, t1);
    const Tensor q = rows.slice(1, 0, qk), k = rows.slice(1, qk, 2 * qk), v = rows.slice(1, 2 * qk, conv.dim(1));
    if (how.through_op)
      ops::gated_delta_rule(q, k, v, a.slice(0, t0, t1), b.slice(0, t0, t1), a_log, dt_bias, in.shape, state, o, how.algorithm);
    else ops::cuda::gated_delta_chunked(q, k, v, a.slice(0, t0, t1), b.slice(0, t0, t1), a_log, dt_bias, in.shape, state, o, how.math);
  }
  return {host(out), host(state)};
}

double max_abs_diff(const Tensor& x, const Tensor& y) {
  const Tensor a = x.clone(), b = y.clone();
  double m = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]);
    if (!(d <= m)) m = d;  // NaN sticks
  }
  return m;
}

bool same_bits(const Tensor& x, const Tensor& y) {
  const Tensor a = x.clone(), b = y.clone();
  return a.numel() == b.numel() && test::same_bits(a.data<float>(), b.data<float>(), a.numel());
}

std::string name(const GatedDeltaShape& s, int64_t n) {
  return "Hk " + std::to_string(s.n_key_heads) + " Dk " + std::to_string(s.key_dim) + " Hv " + std::to_string(s.n_value_heads) + " Dv " +
         std::to_string(s.value_dim) + " n " + std::to_string(n);
}

// The f32 recurrence's own rounding is ~1e-6; the chunked form regroups the sums (and on tensor
// cores splits operands into tf32 pairs), which the engine tolerates up to 1e-3.
constexpr double kTolerance = 1e-3;

const GatedDeltaShape kShapes[] = {
    {2, 128, 6, 128},  // Qwen3.5 heads, 3 value heads per key head
    {2, 32, 2, 32},    // one value head per key head
    {1, 48, 3, 40},    // Dk and Dv not multiples of 32
    {2, 100, 4, 72},   // Dk padded to 128 inside, Dv spans a partial block of rows
    {1, 16, 1, 8},     // tiny heads
};

TEST_F(CudaGatedDelta, chunked_matches_cpu_sequential_and_chunked_at_odd_lengths) {
  Rng rng(91);
  for (const auto& s : kShapes) {
    double worst[2] = {0.0, 0.0};
    for (int64_t n : {1, 63, 64, 65, 200, 1000}) {
      SCOPED_TRACE(name(s, n) + " " + test::seed_note());
      const Inputs in = make_inputs(s, n, rng);
      const Result seq = cpu(in, GatedDeltaAlgorithm::sequential), chunked = cpu(in, GatedDeltaAlgorithm::chunked);
      for (int m = 0; m < 2; ++m) {
        const Result got = on_gpu(in, {0, n}, {m == 0 ? ChunkedMath::tensor_cores : ChunkedMath::f32});
        const double e_out = max_abs_diff(got.out, seq.out), e_state = max_abs_diff(got.state, seq.state);
        EXPECT_LT(e_out, kTolerance) << (m == 0 ? "tensor cores" : "f32");
        EXPECT_LT(e_state, kTolerance) << (m == 0 ? "tensor cores" : "f32");
        EXPECT_LT(max_abs_diff(got.out, chunked.out), kTolerance);
        EXPECT_LT(max_abs_diff(got.state, chunked.state), kTolerance);
        worst[m] = std::max({worst[m], e_out, e_state});
      }
    }
    std::printf("[chunked vs cpu sequential] %s: max |d| %.3g (tensor cores), %.3g (f32)\n", name(s, 0).c_str(), worst[0], worst[1]);
  }
}

TEST_F(CudaGatedDelta, slow_decay_from_zero_state_over_long_prompts) {
  // Decay close to 1 lets the state grow over many tokens: the hard case for the chunked form.
  Rng rng(92);
  const GatedDeltaShape s{2, 128, 6, 128};
  const int64_t n = 1000;
  Inputs in = make_inputs(s, n, rng, 0.0f, -8.0f);
  const Result seq = cpu(in, GatedDeltaAlgorithm::sequential);
  const Result got = on_gpu(in, {0, n});
  const double e_out = max_abs_diff(got.out, seq.out), e_state = max_abs_diff(got.state, seq.state);
  std::printf("[slow decay, n %lld] max |d| out %.3g, state %.3g\n", static_cast<long long>(n), e_out, e_state);
  EXPECT_LT(e_out, kTolerance);
  EXPECT_LT(e_state, kTolerance);
}

TEST_F(CudaGatedDelta, calls_split_at_multiples_of_64_give_the_same_bits) {
  Rng rng(93);
  for (const auto& s : {GatedDeltaShape{2, 128, 6, 128}, GatedDeltaShape{1, 48, 3, 40}}) {
    const int64_t n = 300;
    SCOPED_TRACE(name(s, n));
    const Inputs in = make_inputs(s, n, rng);
    for (auto math : {ChunkedMath::tensor_cores, ChunkedMath::f32}) {
      const Result whole = on_gpu(in, {0, n}, {math});
      for (const auto& cuts : {std::vector<int64_t>{0, 64, n}, {0, 128, 192, n}, {0, 64, 128, 192, 256, n}}) {
        const Result split = on_gpu(in, cuts, {math});
        EXPECT_TRUE(same_bits(split.out, whole.out)) << "cuts " << cuts.size();
        EXPECT_TRUE(same_bits(split.state, whole.state)) << "cuts " << cuts.size();
      }
      // And a run of the same data repeats its bits (no order-dependent reductions).
      EXPECT_TRUE(same_bits(on_gpu(in, {0, n}, {math}).out, whole.out));
    }
  }
}

TEST_F(CudaGatedDelta, op_runs_chunked_requests_on_the_chunked_kernel) {
  if (!ops::cuda::kChunkedPrefill) GTEST_SKIP() << "the chunked kernel is switched off";
  Rng rng(94);
  const GatedDeltaShape s{2, 128, 6, 128};
  const int64_t n = 130;
  const Inputs in = make_inputs(s, n, rng);
  const Result kernel = on_gpu(in, {0, n});
  // `chunked` and `automatic` from 64 tokens on run the chunked kernel, at any length.
  for (auto algorithm : {GatedDeltaAlgorithm::chunked, GatedDeltaAlgorithm::automatic}) {
    const Result op = on_gpu(in, {0, n}, {ChunkedMath::tensor_cores, true, algorithm});
    EXPECT_TRUE(same_bits(op.out, kernel.out));
    EXPECT_TRUE(same_bits(op.state, kernel.state));
  }
  // `sequential` walks the tokens (the sequential kernel: close, not the same bits).
  const Result seq = on_gpu(in, {0, n}, {ChunkedMath::tensor_cores, true, GatedDeltaAlgorithm::sequential});
  EXPECT_FALSE(same_bits(seq.out, kernel.out));
  EXPECT_LT(max_abs_diff(seq.out, kernel.out), kTolerance);
  // Key heads past the chunked kernel's limit fall back to the sequential kernel.
  const GatedDeltaShape wide{1, 256, 2, 64};
  const Inputs w = make_inputs(wide, 70, rng);
  const Result w_chunked = on_gpu(w, {0, 70}, {ChunkedMath::tensor_cores, true, GatedDeltaAlgorithm::chunked});
  const Result w_seq = on_gpu(w, {0, 70}, {ChunkedMath::tensor_cores, true, GatedDeltaAlgorithm::sequential});
  EXPECT_TRUE(same_bits(w_chunked.out, w_seq.out));
}

TEST_F(CudaGatedDelta, prefix_cache_resume_matches_prefill_from_scratch) {
  // The GatedDeltaNet block's split of a prompt at position pos0: the rows up to the next multiple of
  // 64 token by token, whole chunks chunked, the rest token by token. A prompt prefilled from scratch
  // and one resumed from a snapshot at a multiple of 64 must agree bit for bit.
  Rng rng(95);
  const GatedDeltaShape s{2, 128, 6, 128};
  const int64_t n = 333;
  const Inputs in = make_inputs(s, n, rng);
  auto block_cuts = [&](int64_t pos0, int64_t end, std::vector<int64_t>& cuts, std::vector<GatedDeltaAlgorithm>& algos) {
    const int64_t head = std::min(end, pos0 + (64 - pos0 % 64) % 64), body_end = head + (end - head) / 64 * 64;
    for (auto [b, e, al] : {std::tuple{pos0, head, GatedDeltaAlgorithm::sequential},
                            {head, body_end, GatedDeltaAlgorithm::chunked},
                            {body_end, end, GatedDeltaAlgorithm::sequential}})
      if (b < e) {
        if (cuts.empty()) cuts.push_back(b);
        cuts.push_back(e);
        algos.push_back(al);
      }
  };
  auto prefill = [&](const std::vector<int64_t>& starts) {
    std::vector<int64_t> cuts;
    std::vector<GatedDeltaAlgorithm> algos;
    for (size_t i = 0; i < starts.size(); ++i) block_cuts(starts[i], i + 1 < starts.size() ? starts[i + 1] : n, cuts, algos);
    Tensor conv = gpu(in.conv), a = gpu(in.a), b = gpu(in.b), a_log = gpu(in.a_log), dt_bias = gpu(in.dt_bias), state = gpu(in.state);
    Tensor out = Tensor::zeros({n, s.n_value_heads * s.value_dim}, DType::f32, Device::cuda);
    const int64_t qk = in.qk_cols();
    for (size_t i = 0; i < algos.size(); ++i) {
      Tensor rows = conv.slice(0, cuts[i], cuts[i + 1]), o = out.slice(0, cuts[i], cuts[i + 1]);
      ops::gated_delta_rule(rows.slice(1, 0, qk), rows.slice(1, qk, 2 * qk), rows.slice(1, 2 * qk, conv.dim(1)),
                            a.slice(0, cuts[i], cuts[i + 1]), b.slice(0, cuts[i], cuts[i + 1]), a_log, dt_bias, s, state, o, algos[i]);
    }
    return Result{host(out), host(state)};
  };
  const Result scratch = prefill({0});
  for (const auto& starts : {std::vector<int64_t>{0, 64}, {0, 192}, {0, 128, 320}}) {
    const Result resumed = prefill(starts);
    EXPECT_TRUE(same_bits(resumed.out, scratch.out)) << starts.back();
    EXPECT_TRUE(same_bits(resumed.state, scratch.state)) << starts.back();
  }
  const Result seq = cpu(in, GatedDeltaAlgorithm::sequential);
  EXPECT_LT(max_abs_diff(scratch.out, seq.out), kTolerance);
  EXPECT_LT(max_abs_diff(scratch.state, seq.state), kTolerance);
}

}  // namespace
}  // namespace sanctum

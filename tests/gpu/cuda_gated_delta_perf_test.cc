// Timings of the gated delta rule on the GPU at the Qwen3.5-27B shape (16 key / 48 value heads of
// 128): the sequential kernel against the chunked one (tensor cores and f32), with the chunked
// form's max |difference| from the sequential kernel. Not assertions: machines are noisy.
// Disabled by default; run on a GPU machine with --gtest_also_run_disabled_tests --gtest_filter='*Perf*'.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "../ops/op_test_util.h"
#include "gpu_test_util.h"
#include "gpu_timing.h"
#include "ops/cuda/gated_delta_chunked.h"
#include "ops/gated_delta.h"
#include "tensor/device_memory.h"

namespace sanctum {
namespace {

using test::Rng;

double max_abs_diff(const Tensor& x, const Tensor& y) {
  const Tensor a = x.to(Device::cpu), b = y.to(Device::cpu);
  double m = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]);
    if (!(d <= m)) m = d;
  }
  return m;
}

TEST(CudaGatedDeltaPerf, DISABLED_sequential_vs_chunked_at_27b_shape) {
  if (!device_memory::cuda_available()) GTEST_SKIP();
  Rng rng(7);
  const ops::GatedDeltaShape s{16, 128, 48, 128};
  const int64_t qk = 16 * 128, conv_dim = 2 * qk + 48 * 128;
  Tensor a_log = Tensor::zeros({48}, DType::f32);
  for (int64_t h = 0; h < 48; ++h) a_log.data<float>()[h] = std::log(rng.uniform(0.01f, 16.0f));
  a_log = a_log.to(Device::cuda);
  const Tensor dt_bias = test::random_tensor({48}, DType::f32, rng, 0.5f).to(Device::cuda);
  const Tensor state0 = test::random_tensor({48, 128, 128}, DType::f32, rng, 0.5f).to(Device::cuda);
  for (int64_t n : {64, 128, 512, 4096}) {
    // q, k, v: column slices of the conv output, as the block passes them.
    const Tensor conv = test::random_tensor({n, conv_dim}, DType::f32, rng).to(Device::cuda);
    const Tensor q = conv.slice(1, 0, qk), k = conv.slice(1, qk, 2 * qk), v = conv.slice(1, 2 * qk, conv_dim);
    const Tensor a = test::random_tensor({n, 48}, DType::f32, rng).to(Device::cuda);
    const Tensor b = test::random_tensor({n, 48}, DType::f32, rng).to(Device::cuda);
    Tensor out_seq = Tensor::zeros({n, 48 * 128}, DType::f32, Device::cuda), out_tc = out_seq.clone(), out_f32 = out_seq.clone();
    Tensor st_seq = state0.clone(), st_tc = state0.clone(), st_f32 = state0.clone();
    // One call each from the same state for the errors, then the timings (which move the states on).
    auto seq = [&](Tensor& st, Tensor& o) {
      ops::gated_delta_rule(q, k, v, a, b, a_log, dt_bias, s, st, o, ops::GatedDeltaAlgorithm::sequential);
    };
    auto chunked = [&](Tensor& st, Tensor& o, ops::cuda::ChunkedMath math) {
      ops::cuda::gated_delta_chunked(q, k, v, a, b, a_log, dt_bias, s, st, o, math);
    };
    seq(st_seq, out_seq);
    chunked(st_tc, out_tc, ops::cuda::ChunkedMath::tensor_cores);
    chunked(st_f32, out_f32, ops::cuda::ChunkedMath::f32);
    const double e_tc = std::fmax(max_abs_diff(out_tc, out_seq), max_abs_diff(st_tc, st_seq));
    const double e_f32 = std::fmax(max_abs_diff(out_f32, out_seq), max_abs_diff(st_f32, st_seq));
    const int reps = n >= 4096 ? 5 : 20;
    const double t_seq = test::time_calls([&] { seq(st_seq, out_seq); }, reps, 2);
    const double t_tc = test::time_calls([&] { chunked(st_tc, out_tc, ops::cuda::ChunkedMath::tensor_cores); }, reps, 2);
    const double t_f32 = test::time_calls([&] { chunked(st_f32, out_f32, ops::cuda::ChunkedMath::f32); }, reps, 2);
    std::printf(
        "gated_delta n=%lld: sequential %.1f us, chunked tensor cores %.1f us (x%.2f, max |d| %.2g), chunked f32 %.1f us "
        "(x%.2f, max |d| %.2g)\n",
        static_cast<long long>(n), t_seq * 1e6, t_tc * 1e6, t_seq / t_tc, e_tc, t_f32 * 1e6, t_seq / t_f32, e_f32);
  }
}

}  // namespace
}  // namespace sanctum

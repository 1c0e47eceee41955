// Timings of the CUDA kernels at production shapes, for tuning (not assertions: machines are noisy).
// Disabled by default; run on a GPU machine with --gtest_also_run_disabled_tests --gtest_filter='*Perf*'.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "../ops/op_test_util.h"
#include "gpu_test_util.h"
#include "gpu_timing.h"
#include "matvec_layout_bench.h"
#include "matvec_mma_sweep.h"
#include "ops/cuda/attention_paths.cuh"
#include "ops/cuda/dequantize.cuh"
#include "ops/cuda/gemm_tiles.h"
#include "ops/cuda/matvec_tiles.h"
#include "ops/kv_cache_ops.h"
#include "ops/ops.h"
#include "ops/precision.h"
#include "tensor/cuda/stream.h"
#include "tensor/device_memory.h"

namespace sanctum {
namespace {

using test::Rng;
using test::time_calls;
using test::time_graph;

TEST(CudaPerf, DISABLED_kernels_at_27b_shapes) {
  if (!device_memory::cuda_available()) GTEST_SKIP();
  Rng rng(1);
  for (auto [m, k] : {std::pair<int64_t, int64_t>{17408, 5120}, {5120, 17408}, {10240, 5120}, {48, 5120}, {248320, 5120}}) {
    Weight w = test::gpu(test::random_quantized(m, k, 4, 64, DType::bf16, rng));
    const ops::MatmulPrecision saved = ops::matmul_precision();
    for (ops::MatmulPrecision p : {ops::MatmulPrecision::f32, ops::MatmulPrecision::bf16}) {
      ops::set_matmul_precision(p);
      for (int64_t n : {1, 4}) {
        Tensor x = Tensor::zeros({n, k}, DType::f32, Device::cuda), y = Tensor::zeros({n, m}, DType::f32, Device::cuda);
        const double s = time_calls([&] { ops::matmul(x, w, y); }, 50);
        std::printf("matvec q4g64 %6lld x %6lld n=%lld %s: %8.1f us  %7.0f GB/s\n", static_cast<long long>(m), static_cast<long long>(k),
                    static_cast<long long>(n), p == ops::MatmulPrecision::f32 ? "f32 " : "bf16", s * 1e6,
                    static_cast<double>(w.nbytes()) / s / 1e9);
      }
    }
    ops::set_matmul_precision(saved);
  }
  // Host cost of launching one tiny op (no waiting): what a decode step pays per op without a graph.
  Tensor a = Tensor::zeros({1, 64}, DType::f32, Device::cuda);
  const double launch = time_calls([&] { ops::add(a, a, a); }, 2000);
  std::printf("ops::add on 64 floats: %.1f us per call\n", launch * 1e6);
  Tensor nw = Tensor::zeros({5120}, DType::bf16, Device::cuda), xr = Tensor::zeros({1, 5120}, DType::f32, Device::cuda);
  std::printf("rms_norm 5120: %.1f us\n", time_calls([&] { ops::rms_norm(xr, nw, 1e-6f, xr, 0.0f); }, 500) * 1e6);
  // Attention decode at 512 and 4096 keys, 24 heads / 4 KV heads of 256, in both modes (the exact one
  // keeps decode on the unsplit flash kernel; the bf16 default takes the split-K decode kernel).
  const ops::MatmulPrecision before = ops::matmul_precision();
  for (ops::MatmulPrecision p : {ops::MatmulPrecision::f32, ops::MatmulPrecision::bf16}) {
    ops::set_matmul_precision(p);
    for (int64_t keys : {512, 4096}) {
      Tensor q = Tensor::zeros({1, 24, 256}, DType::f32, Device::cuda), o = Tensor::zeros({1, 24, 256}, DType::f32, Device::cuda);
      Tensor kv = Tensor::zeros({keys, 4, 256}, DType::f32, Device::cuda);
      std::printf("attention decode %lld keys %s: %.1f us (%.1f us in a graph)\n", static_cast<long long>(keys),
                  p == ops::MatmulPrecision::f32 ? "f32 " : "bf16",
                  time_calls([&] { ops::attention(q, kv, kv, keys - 1, 0.0625f, o); }, 100) * 1e6,
                  time_graph([&] { ops::attention(q, kv, kv, keys - 1, 0.0625f, o); }, 100) * 1e6);
    }
  }
  ops::set_matmul_precision(before);
  for (int64_t n : {1, 4096}) {
    Tensor q = Tensor::zeros({n, 24, 256}, DType::f32, Device::cuda), o = Tensor::zeros({n, 24, 256}, DType::f32, Device::cuda);
    Tensor kv = Tensor::zeros({n, 4, 256}, DType::f32, Device::cuda);
    if (n > 1)
      std::printf("attention prefill %lld: %.1f ms\n", static_cast<long long>(n),
                  time_calls([&] { ops::attention(q, kv, kv, 0, 0.0625f, o); }, 3) * 1e3);
  }
  // Short decode batches (speculative decoding) at 4096 keys, and prefill in both precision modes.
  for (int64_t n : {2, 4, 8}) {
    Tensor q = Tensor::zeros({n, 24, 256}, DType::f32, Device::cuda), o = Tensor::zeros({n, 24, 256}, DType::f32, Device::cuda);
    Tensor kv = Tensor::zeros({4096, 4, 256}, DType::f32, Device::cuda);
    std::printf("attention decode n=%lld, 4096 keys: %.1f us in a graph\n", static_cast<long long>(n),
                time_graph([&] { ops::attention(q, kv, kv, 4096 - n, 0.0625f, o); }, 100) * 1e6);
  }
  const ops::MatmulPrecision saved = ops::matmul_precision();
  for (ops::MatmulPrecision p : {ops::MatmulPrecision::f32, ops::MatmulPrecision::bf16})
    for (int64_t n : {512, 4096}) {
      ops::set_matmul_precision(p);
      Tensor q = test::random_tensor({n, 24, 256}, DType::f32, rng).to(Device::cuda);
      Tensor kv = test::random_tensor({n, 4, 256}, DType::f32, rng).to(Device::cuda);
      Tensor o = Tensor::zeros({n, 24, 256}, DType::f32, Device::cuda);
      std::printf("attention prefill %lld (%s): %.2f ms\n", static_cast<long long>(n), ops::matmul_precision_name(p),
                  time_calls([&] { ops::attention(q, kv, kv, 0, 0.0625f, o); }, 5) * 1e3);
    }
  ops::set_matmul_precision(saved);
  // GatedDeltaNet: 16 key / 48 value heads of 128.
  ops::GatedDeltaShape s{16, 128, 48, 128};
  Tensor a_log = Tensor::zeros({48}, DType::f32, Device::cuda), state = Tensor::zeros({48, 128, 128}, DType::f32, Device::cuda);
  for (int64_t n : {1, 4096}) {
    Tensor qk = Tensor::zeros({n, 2048}, DType::f32, Device::cuda), v = Tensor::zeros({n, 6144}, DType::f32, Device::cuda);
    Tensor ab = Tensor::zeros({n, 48}, DType::f32, Device::cuda), out = Tensor::zeros({n, 6144}, DType::f32, Device::cuda);
    std::printf("gated_delta_rule n=%lld: %.1f us (%.1f us in a graph)\n", static_cast<long long>(n),
                time_calls([&] { ops::gated_delta_rule(qk, qk, v, ab, ab, a_log, a_log, s, state, out); }, n > 1 ? 3 : 200) * 1e6,
                time_graph([&] { ops::gated_delta_rule(qk, qk, v, ab, ab, a_log, a_log, s, state, out); }, n > 1 ? 3 : 200) * 1e6);
    Tensor conv_state = Tensor::zeros({3, 10240}, DType::f32, Device::cuda), taps = Tensor::zeros({4, 10240}, DType::f32, Device::cuda);
    Tensor cx = Tensor::zeros({n, 10240}, DType::f32, Device::cuda), cy = Tensor::zeros({n, 10240}, DType::f32, Device::cuda);
    std::printf("conv1d n=%lld: %.1f us (%.1f us in a graph)\n", static_cast<long long>(n),
                time_calls([&] { ops::causal_conv1d_silu_taps(cx, conv_state, taps, cy); }, n > 1 ? 3 : 200) * 1e6,
                time_graph([&] { ops::causal_conv1d_silu_taps(cx, conv_state, taps, cy); }, n > 1 ? 3 : 200) * 1e6);
  }
}

// The prefill GEMM at the 24B and 27B shapes for 512 to 4,096 tokens: the Hopper kernel over the tiled
// weight against the path it replaces (the same weight dequantized to bf16, then cuBLAS). What
// tiles_gemm_preferred says rests on these figures.
TEST(CudaPerf, DISABLED_prefill_gemm) {
  if (!device_memory::cuda_available()) GTEST_SKIP();
  Rng rng(3);
  const ops::MatmulPrecision saved = ops::matmul_precision();
  ops::set_matmul_precision(ops::MatmulPrecision::bf16);
  const std::pair<int64_t, int64_t> shapes[] = {{6144, 5120}, {5120, 4096},  {65536, 5120}, {5120, 32768}, {16480, 5120},
                                                {5120, 6144}, {12288, 5120}, {34816, 5120}, {5120, 17408}};
  for (auto [m, k] : shapes) {
    Weight tiled = test::gpu(test::random_quantized(m, k, 4, 64, DType::bf16, rng));
    ops::cuda::tile_weight(tiled);
    for (int64_t n : {512, 768, 1024, 2048, 4096}) {
      Tensor x = test::random_tensor({n, k}, DType::f32, rng).to(Device::cuda), y = Tensor::zeros({n, m}, DType::f32, Device::cuda);
      const double flop = 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
      const double copy = time_calls([&] { ops::cuda::copy_gemm(x, tiled, y); }, 10),
                   fused = time_calls([&] { ops::cuda::tiles_gemm(x, tiled, y); }, 10);
      std::printf(
          "prefill gemm %6lld x %6lld n=%5lld: tiled %8.1f us (%4.0f TFLOP/s)  dequantize+cuBLAS %8.1f us (%4.0f TFLOP/s)  %.2fx  %s\n",
          static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n), fused * 1e6, flop / fused / 1e12, copy * 1e6,
          flop / copy / 1e12, copy / fused, ops::cuda::tiles_gemm_preferred(tiled, n) ? "tiled preferred" : "copy preferred");
    }
  }
  ops::set_matmul_precision(saved);
}

// The bf16 copy cuBLAS multiplies at the 24B and 27B shapes, tiled and row layout: time and the
// bandwidth of its reads and writes together, against a device-to-device copy of the same bytes.
TEST(CudaPerf, DISABLED_dequantize) {
  if (!device_memory::cuda_available()) GTEST_SKIP();
  Rng rng(5);
  for (auto [m, k] : {std::pair<int64_t, int64_t>{65536, 5120}, {5120, 32768}, {34816, 5120}, {6144, 5120}}) {
    const Weight rows = test::gpu(test::random_quantized(m, k, 4, 64, DType::bf16, rng));
    Weight tiled = rows;
    tiled.data = rows.data.clone();
    tiled.scales = rows.scales.clone();
    tiled.biases = rows.biases.clone();
    ops::cuda::tile_weight(tiled);
    Tensor out = Tensor::zeros({m, k}, DType::bf16, Device::cuda), other = Tensor::zeros({m, k}, DType::bf16, Device::cuda);
    auto* dst = static_cast<__nv_bfloat16*>(out.raw());
    const double bytes = static_cast<double>(rows.nbytes() + out.nbytes());
    auto report = [&](const char* what, const std::function<void()>& call) {
      const double t = time_graph(call, 10);
      std::printf("dequantize %6lld x %6lld %-16s %7.1f us (%4.2f TB/s)\n", static_cast<long long>(m), static_cast<long long>(k), what,
                  t * 1e6, bytes / t / 1e12);
    };
    report("tiled", [&] { ops::cuda::dequantize_to_bf16(tiled, dst); });
    report("rows", [&] { ops::cuda::dequantize_to_bf16(rows, dst); });
    report("copy, same bytes",
           [&] { cudaMemcpyAsync(dst, other.raw(), static_cast<size_t>(bytes / 2), cudaMemcpyDeviceToDevice, cuda::stream()); });
  }
}

// Every tuning of the tensor-core mat-vec at the decode shapes of the 27B (incl. the fused
// GatedDeltaNet input projection, 16480 rows) and 24B models: GPU time per call, bandwidth, and
// whether it gives the production kernel's bits.
TEST(CudaPerf, DISABLED_mma_matvec_tunings) {
  if (!device_memory::cuda_available()) GTEST_SKIP();
  Rng rng(2);
  const ops::MatmulPrecision saved = ops::matmul_precision();
  ops::set_matmul_precision(ops::MatmulPrecision::bf16);
  for (auto [m, k] : {std::pair<int64_t, int64_t>{17408, 5120},
                      {5120, 17408},
                      {10240, 5120},
                      {16480, 5120},
                      {6144, 5120},
                      {32768, 5120},
                      {5120, 32768},
                      {248320, 5120}}) {
    Weight w = test::gpu(test::random_quantized(m, k, 4, 64, DType::bf16, rng));
    for (int64_t n : {1, 4}) {
      Tensor x = test::random_tensor({n, k}, DType::f32, rng).to(Device::cuda);
      Tensor want = Tensor::zeros({n, m}, DType::f32, Device::cuda), y = Tensor::zeros({n, m}, DType::f32, Device::cuda);
      ops::matmul(x, w, want);
      const Tensor want_host = want.to(Device::cpu);
      for (const test::MmaVariant& v : test::mma_variants()) {
        if (!test::run_mma_variant(v, w, x, y)) continue;
        const Tensor got = y.to(Device::cpu);
        const bool same = std::memcmp(got.raw(), want_host.raw(), static_cast<size_t>(n * m) * sizeof(float)) == 0;
        const double s = time_graph([&] { test::run_mma_variant(v, w, x, y); }, 50);
        std::printf("tuning %6lld x %6lld n=%lld %-28s %8.2f us %7.0f GB/s %s\n", static_cast<long long>(m), static_cast<long long>(k),
                    static_cast<long long>(n), v.name().c_str(), s * 1e6, static_cast<double>(w.nbytes()) / s / 1e9,
                    same ? "same bits" : "DIFFERENT BITS");
      }
    }
  }
  ops::set_matmul_precision(saved);
}

// Prefill attention at the benchmark shapes: 2,048 queries with no cache ahead and with 2,048 keys
// ahead (the second forward of a 4,096-token prompt in 2,048-token forwards), and 4,096 in one:
// what ops::attention runs (the wgmma kernel where it applies), the mma.sync flash kernel and the
// cuBLAS path.
TEST(CudaPerf, DISABLED_attention_prefill) {
  if (!device_memory::cuda_available()) GTEST_SKIP();
  const ops::MatmulPrecision saved = ops::matmul_precision();
  ops::set_matmul_precision(ops::MatmulPrecision::bf16);
  struct Shape {
    const char* name;
    int64_t heads, kv_heads, d;
  };
  for (Shape s : {Shape{"24B", 32, 8, 128}, Shape{"27B", 24, 4, 256}, Shape{"35B-A3B", 16, 2, 256}}) {
    for (auto [n, pos0] : {std::pair<int64_t, int64_t>{2048, 0}, {2048, 2048}, {4096, 0}}) {
      const int64_t keys = pos0 + n;
      Tensor q = Tensor::zeros({n, s.heads, s.d}, DType::f32, Device::cuda), o = Tensor::zeros({n, s.heads, s.d}, DType::f32, Device::cuda);
      Tensor kv = Tensor::zeros({keys, s.kv_heads, s.d}, DType::f32, Device::cuda);
      const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
      const ops::cuda::AttnView view = ops::cuda::attn_view(q, kv, kv, pos0, nullptr, scale, o);
      // Causal: query i sees pos0 + i + 1 keys; 2 flops per multiply-add, two products (Q K^T, P V).
      const double flops = 4.0 * static_cast<double>(s.d * s.heads) * static_cast<double>(n * pos0 + n * (n + 1) / 2);
      const double used = time_calls([&] { ops::attention(q, kv, kv, pos0, scale, o); }, 10);
      const double mma = time_calls([&] { ops::cuda::attention_flash_bf16(view); }, 10);
      const double gemm = time_calls([&] { ops::cuda::attention_gemm(view); }, 10);
      std::printf(
          "attention prefill %-8s %lld/%lld heads of %lld, n=%lld after %5lld: ops::attention %7.1f us (%4.0f TFLOP/s)%s, "
          "mma.sync flash %7.1f us (%4.0f), cuBLAS %7.1f us (%4.0f)\n",
          s.name, static_cast<long long>(s.heads), static_cast<long long>(s.kv_heads), static_cast<long long>(s.d),
          static_cast<long long>(n), static_cast<long long>(pos0), used * 1e6, flops / used / 1e12,
          ops::cuda::attention_flash_wgmma_ok(view) ? " [wgmma]" : "", mma * 1e6, flops / mma / 1e12, gemm * 1e6, flops / gemm / 1e12);
    }
  }
  ops::set_matmul_precision(saved);
}

// The decode attention kernel alone over a cache in each stored dtype, at the 27B's and the 24B's
// attention shapes and 4K to 64K keys (one query at the last position, the fast mode's path): GPU
// time per call, the cache's bytes over it, and the time against the f32 cache's. Rows repeat a random
// block of 4,096 (the same bytes each dtype; the kernel's work does not depend on the values).
TEST(CudaPerf, DISABLED_attention_decode_kv_dtypes) {
  if (!device_memory::cuda_available()) GTEST_SKIP();
  const ops::MatmulPrecision saved = ops::matmul_precision();
  ops::set_matmul_precision(ops::MatmulPrecision::bf16);
  struct Shape {
    const char* name;
    int64_t heads, kv_heads, d;
  };
  constexpr int64_t kBlock = 4096;
  Rng rng(7);
  for (Shape s : {Shape{"27B", 24, 4, 256}, Shape{"24B", 32, 8, 128}}) {
    const Tensor k_rows = test::random_tensor({kBlock, s.kv_heads * s.d}, DType::f32, rng).to(Device::cuda);
    const Tensor v_rows = test::random_tensor({kBlock, s.kv_heads * s.d}, DType::f32, rng).to(Device::cuda);
    const Tensor q = test::random_tensor({1, s.heads, s.d}, DType::f32, rng).to(Device::cuda);
    Tensor o = Tensor::zeros({1, s.heads, s.d}, DType::f32, Device::cuda);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
    for (int64_t keys : {4096, 16384, 65536}) {
      double f32_seconds = 0.0;
      for (ops::KvCacheDtype dtype : {ops::KvCacheDtype::f32, ops::KvCacheDtype::bf16, ops::KvCacheDtype::q8, ops::KvCacheDtype::q4v}) {
        const ops::KvRows k = ops::KvRows::zeros(keys, s.kv_heads, s.d, ops::key_format(dtype), Device::cuda);
        const ops::KvRows v = ops::KvRows::zeros(keys, s.kv_heads, s.d, ops::value_format(dtype), Device::cuda);
        std::vector<int32_t> block(kBlock);
        for (int64_t b = 0; b < keys; b += kBlock) {
          for (int64_t i = 0; i < kBlock; ++i) block[static_cast<size_t>(i)] = static_cast<int32_t>(b + i);
          ops::store_kv_rows(k_rows, k, ops::Positions{block});
          ops::store_kv_rows(v_rows, v, ops::Positions{block});
        }
        const std::vector<int32_t> pos{static_cast<int32_t>(keys - 1)};
        const double t = time_graph([&] { ops::attention(q, k, v, ops::Positions{pos}, scale, o); }, 50);
        if (dtype == ops::KvCacheDtype::f32) f32_seconds = t;
        std::printf("attention decode %-3s %lld/%lld heads of %lld, %5lld keys, %-4s cache: %8.1f us %6.0f GB/s  %.3fx the f32 time\n",
                    s.name, static_cast<long long>(s.heads), static_cast<long long>(s.kv_heads), static_cast<long long>(s.d),
                    static_cast<long long>(keys), ops::kv_cache_dtype_name(dtype), t * 1e6,
                    static_cast<double>(k.nbytes() + v.nbytes()) / t / 1e9, t / f32_seconds);
      }
    }
  }
  ops::set_matmul_precision(saved);
}

// Decode mat-vecs over a stream of distinct weights several times the L2, as a step reads them.
TEST(CudaPerf, DISABLED_matvec_layer_stream) {
  if (!device_memory::cuda_available()) GTEST_SKIP();
  test::matvec_layer_stream_report(4);
}

}  // namespace
}  // namespace sanctum

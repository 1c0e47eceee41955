// Kernel benchmark for the CPU op set at Qwen2.5-0.5B shapes (MLX 4-bit, group 64, bf16 scales):
//   - streaming-read memory bandwidth with the compute pool's threads (the decode floor),
//   - quantized mat-vec GB/s per shape, with weights cycled through > L3 so they come from DRAM,
//   - one decode step's worth of mat-vecs (24 layers + lm_head) as tok/s,
//   - 512-row quantized matmul GFLOP/s (prefill),
// each in both matmul precisions (f32 activations, int8 activations) side by side,
//   - the int8 dot-product peak: vpdpbusd (64 u8 x s8 products each) per second per thread and with
//     every thread, the ceiling of any int8 mat-mat on this CPU (a decode batch of B rows needs
//     B x (weights) / 64 of them a step).
// Build: bench/kernels/build.sh [build dir]. Run: kernels_bench [threads]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <immintrin.h>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "ops/matmul.h"
#include "ops/precision.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

using namespace sanctum;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

Weight make_q4(int64_t rows, int64_t cols, std::mt19937& gen) {
  Weight w;
  w.rows = rows;
  w.cols = cols;
  w.quant = {4, 64};
  w.name = "bench";
  w.data = Tensor::zeros({rows, cols / 8}, DType::u32);
  w.scales = Tensor::zeros({rows, cols / 64}, DType::bf16);
  w.biases = Tensor::zeros({rows, cols / 64}, DType::bf16);
  auto* d = w.data.data<uint32_t>();
  for (int64_t i = 0; i < w.data.numel(); ++i) d[i] = gen();
  for (int64_t i = 0; i < w.scales.numel(); ++i) {
    w.scales.data<uint16_t>()[i] = f32_to_bf16(0.01f + 0.001f * static_cast<float>(gen() % 16));
    w.biases.data<uint16_t>()[i] = f32_to_bf16(-0.05f);
  }
  validate_weight(w);
  // As a model load does: in int8 mode the scales and biases are transposed once for the int8 kernels
  // (the f32 kernels keep reading the originals, which stay in place here).
  const ops::MatmulPrecision mode = ops::matmul_precision();
  ops::set_matmul_precision(ops::MatmulPrecision::int8);
  ops::prepare_weight(w);
  ops::set_matmul_precision(mode);
  return w;
}

// Sums 64-bit words of [begin, end) so the compiler cannot drop the reads.
uint64_t read_range(const uint64_t* p, size_t n) {
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 += p[i];
    a1 += p[i + 1];
    a2 += p[i + 2];
    a3 += p[i + 3];
  }
  return a0 ^ a1 ^ a2 ^ a3;
}

double measure_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  const size_t words = bytes / 8;
  std::vector<uint64_t> buf(words, 1);
  ThreadPool& pool = compute_pool();
  std::vector<uint64_t> sink(static_cast<size_t>(pool.size()));
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now_s();
    pool.run_on_all([&](int t) {
      const size_t b = words * static_cast<size_t>(t) / static_cast<size_t>(pool.size());
      const size_t e = words * static_cast<size_t>(t + 1) / static_cast<size_t>(pool.size());
      sink[static_cast<size_t>(t)] += read_range(buf.data() + b, e - b);
    });
    best = std::max(best, static_cast<double>(bytes) / (now_s() - t0) / 1e9);
  }
  if (sink[0] == 42) std::puts("");
  return best;
}

// GB/s of y = x · wᵀ with n rows of x (1: a mat-vec), cycling through enough copies of the weight to
// defeat the caches. hot: one copy, re-read from cache (the kernel's compute ceiling).
double matvec_gbps(int64_t rows, int64_t cols, std::mt19937& gen, double* us_per_call, bool hot = false, int64_t n = 1) {
  const size_t one = static_cast<size_t>(rows * cols / 2 + rows * cols / 64 * 4);
  const int copies = hot ? 1 : static_cast<int>(std::max<size_t>(1, (size_t{600} << 20) / one));
  std::vector<Weight> ws;
  for (int c = 0; c < copies; ++c) ws.push_back(make_q4(rows, cols, gen));
  Tensor x = Tensor::zeros({n, cols}, DType::f32), y = Tensor::zeros({n, rows}, DType::f32);
  for (int64_t i = 0; i < n * cols; ++i) x.data<float>()[i] = static_cast<float>(gen() % 100) / 100.0f - 0.5f;
  for (auto& w : ws) ops::matmul(x, w, y);  // warm-up
  double best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now_s();
    const int inner = hot ? 200 : 1;
    for (int it = 0; it < inner; ++it)
      for (auto& w : ws) ops::matmul(x, w, y);
    best = std::min(best, (now_s() - t0) / copies / inner);
  }
  *us_per_call = best * 1e6;
  return static_cast<double>(ws[0].nbytes()) / best / 1e9;
}

// vpdpbusd per second on one thread: 12 independent accumulator chains (more than latency x ports on
// any AVX-512 VNNI core), operands in registers. 0 where the CPU lacks AVX-512 VNNI.
__attribute__((target("avx512f,avx512vnni"))) double vnni_rate_kernel(int64_t iterations) {
  __m512i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
  __m512i w = _mm512_set1_epi32(0x01010101);
  const __m512i x = _mm512_set1_epi32(0x02020202);
  const double t0 = now_s();
  for (int64_t n = 0; n < iterations; ++n) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], w, x);
    asm volatile("" : "+v"(w));  // keeps the loop from being folded
  }
  const double seconds = now_s() - t0;
  alignas(64) int32_t lanes[16];
  int32_t sink = 0;
  for (int i = 0; i < 12; ++i) {
    _mm512_store_si512(lanes, acc[i]);
    sink += lanes[i];
  }
  if (sink == 42) std::printf(" ");
  return static_cast<double>(iterations) * 12 / seconds;
}

// The rate summed over `tasks` threads of the compute pool running the kernel at once.
double vnni_rate(int tasks) {
  if (!__builtin_cpu_supports("avx512vnni")) return 0;
  constexpr int64_t kIterations = 50'000'000;
  std::vector<double> rates(static_cast<size_t>(tasks));
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    compute_pool().parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) rates[static_cast<size_t>(t)] = vnni_rate_kernel(kIterations);
    });
    double sum = 0;
    for (double r : rates) sum += r;
    best = std::max(best, sum);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) set_compute_threads(std::atoi(argv[1]));
  std::mt19937 gen(1234);
  std::printf("threads: %d\n", compute_pool().size());
  const double bw = measure_bandwidth();
  std::printf("memory bandwidth (streaming read, 1 GiB): %.1f GB/s\n", bw);
  const double one = vnni_rate(1), all = vnni_rate(compute_pool().size());
  std::printf("int8 dot-product peak: %.2f G vpdpbusd/s on one thread, %.2f G on %d (%.0f G int8 MAC/s)\n", one / 1e9, all / 1e9,
              compute_pool().size(), all * 64 / 1e9);

  struct Shape {
    const char* name;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{"896->4864 (gate/up)", 4864, 896},
                          {"4864->896 (down)", 896, 4864},
                          {"896->151936 (lm_head)", 151936, 896},
                          {"896->896 (q/o)", 896, 896}};
  const ops::MatmulPrecision modes[] = {ops::MatmulPrecision::f32, ops::MatmulPrecision::int8};
  for (const auto& s : shapes)
    for (auto mode : modes) {
      ops::set_matmul_precision(mode);
      double us;
      const double gbps = matvec_gbps(s.rows, s.cols, gen, &us);
      std::printf("[%-4s] q4g64 matvec %-24s %8.1f us  %6.1f GB/s  %5.1f%% of bandwidth\n", ops::matmul_precision_name(mode), s.name, us,
                  gbps, 100 * gbps / bw);
    }

  for (auto mode : modes) {
    ops::set_matmul_precision(mode);
    double us;
    const double gbps = matvec_gbps(896, 896, gen, &us, true);
    std::printf("[%-4s] q4g64 matvec 896->896 cache-hot (compute ceiling) %8.1f us  %6.1f GB/s\n", ops::matmul_precision_name(mode), us,
                gbps);
  }

  // A decode batch of 8 rows (the row-tiled int8 kernel), weights from memory and from cache: the
  // same rate both ways means the kernel's instructions, not the weight reads, bound it.
  ops::set_matmul_precision(ops::MatmulPrecision::int8);
  for (bool hot : {false, true}) {
    const int64_t n = 8, rows = 4864, cols = 896;
    double us;
    matvec_gbps(rows, cols, gen, &us, hot, n);
    std::printf("[int8] q4g64 %lld rows %lld->%lld (gate/up), %s %8.1f us  %6.1f G MAC/s\n", static_cast<long long>(n),
                static_cast<long long>(cols), static_cast<long long>(rows), hot ? "cache-hot" : "from memory", us,
                static_cast<double>(n * rows * cols) / us / 1e3);
  }

  // One decode step of Qwen2.5-0.5B: 24 x (q, k, v, o, gate, up, down) + lm_head, weights all distinct.
  {
    std::vector<Weight> layer_ws;
    const int64_t hidden = 896, inter = 4864, kv = 128, vocab = 151936;
    for (int l = 0; l < 24; ++l)
      for (auto [r, c] : {std::pair<int64_t, int64_t>{hidden, hidden},
                          {kv, hidden},
                          {kv, hidden},
                          {hidden, hidden},
                          {inter, hidden},
                          {inter, hidden},
                          {hidden, inter}})
        layer_ws.push_back(make_q4(r, c, gen));
    layer_ws.push_back(make_q4(vocab, hidden, gen));
    size_t total = 0;
    for (auto& w : layer_ws) total += w.nbytes();
    std::vector<Tensor> xs, ys;
    for (auto& w : layer_ws) {
      xs.push_back(Tensor::zeros({1, w.cols}, DType::f32));
      ys.push_back(Tensor::zeros({1, w.rows}, DType::f32));
    }
    for (auto mode : modes) {
      ops::set_matmul_precision(mode);
      double best = 1e9;
      for (int rep = 0; rep < 8; ++rep) {
        const double t0 = now_s();
        for (size_t i = 0; i < layer_ws.size(); ++i) ops::matmul(xs[i], layer_ws[i], ys[i]);
        best = std::min(best, now_s() - t0);
      }
      std::printf(
          "[%-4s] decode step mat-vecs (%.0f MB of weights): %.2f ms -> %.1f tok/s ceiling, %.1f GB/s (%.1f%% of bandwidth); "
          "floor at measured bandwidth %.1f tok/s\n",
          ops::matmul_precision_name(mode), total / 1e6, best * 1e3, 1.0 / best, total / best / 1e9, 100 * total / best / 1e9 / bw,
          bw * 1e9 / total);
    }
  }

  // Prefill: 512 x rows.
  for (auto [r, c] : {std::pair<int64_t, int64_t>{4864, 896}, {896, 4864}, {896, 896}}) {
    Weight w = make_q4(r, c, gen);
    const int64_t n = 512;
    Tensor x = Tensor::zeros({n, c}, DType::f32), y = Tensor::zeros({n, r}, DType::f32);
    for (int64_t i = 0; i < n * c; ++i) x.data<float>()[i] = static_cast<float>(gen() % 100) / 100.0f - 0.5f;
    for (auto mode : modes) {
      ops::set_matmul_precision(mode);
      ops::matmul(x, w, y);
      double best = 1e9;
      for (int rep = 0; rep < 3; ++rep) {
        const double t0 = now_s();
        ops::matmul(x, w, y);
        best = std::min(best, now_s() - t0);
      }
      std::printf("[%-4s] q4g64 matmul n=512 %5lld->%-5lld %8.2f ms  %6.1f GFLOP/s%s\n", ops::matmul_precision_name(mode),
                  static_cast<long long>(c), static_cast<long long>(r), best * 1e3, 2.0 * n * r * c / best / 1e9,
                  mode == ops::MatmulPrecision::int8 ? " (equivalent: 2 ops per weight x activation)" : "");
    }
  }
  return 0;
}

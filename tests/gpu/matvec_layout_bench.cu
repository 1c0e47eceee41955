// Decode mat-vecs as a model step runs them: a stream of distinct weights (27B GatedDeltaNet layers,
// together several times the L2), timed as one CUDA graph. Compares the row-layout kernel, every
// tuning of the tiled kernel, the decode step's fused-end launches in each loop form (as shipped, the
// general loop, and two ceilings for trims of the loop), and reads of the same bytes that compute
// nothing: in the same launches (codes, scales and biases apart), in one launch per weight started
// early as the mat-vec is (the ceiling for a launch per weight), and in one launch for all.
#include <cuda_bf16.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpu_timing.h"
#include "matvec_layout_bench.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/matvec_mma.cuh"
#include "ops/cuda/matvec_tiles.cuh"
#include "ops/cuda/matvec_tiles.h"

namespace sanctum::test {

namespace {

using namespace ops::cuda;

// Reads n16 16-byte words, DEPTH per thread in flight, and keeps nothing.
template <int DEPTH>
__global__ void __launch_bounds__(256) read_only(const uint4* __restrict__ p, int64_t n16, uint32_t* sink) {
  uint32_t v = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * DEPTH;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x * DEPTH + threadIdx.x; i < n16; i += stride) {
    uint4 r[DEPTH];
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) r[d] = i + d * blockDim.x < n16 ? __ldcs(p + i + d * blockDim.x) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) v ^= r[d].x ^ r[d].y ^ r[d].z ^ r[d].w;
  }
  if (v == 0x9E3779B9u) *sink = v;
}

// A weight's codes, scales and biases read in one launch started early (programmatic dependent launch),
// as the mat-vec is: each thread's first DEPTH words go out before the wait for the launch ahead, the
// rest after. The ceiling for one launch per weight.
template <int DEPTH>
__global__ void __launch_bounds__(256) read_weight_early(const uint4* __restrict__ codes, int64_t c16, const uint4* __restrict__ scales,
                                                         int64_t s16, const uint4* __restrict__ biases, uint32_t* sink) {
  uint32_t v = 0;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x, me = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n16 = c16 + 2 * s16;  // codes, then scales, then biases, as one range of words
  auto word = [&](int64_t i) {
    return i < c16 ? __ldcs(codes + i) : i < c16 + s16 ? __ldcs(scales + (i - c16)) : __ldcs(biases + (i - c16 - s16));
  };
  uint4 r[DEPTH];
#pragma unroll
  for (int d = 0; d < DEPTH; ++d) r[d] = me + d * threads < n16 ? word(me + d * threads) : make_uint4(0, 0, 0, 0);
  allow_next_early();
  wait_for_previous();
  for (int64_t i = me + DEPTH * threads;; i += DEPTH * threads) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) v ^= r[d].x ^ r[d].y ^ r[d].z ^ r[d].w;
    if (i >= n16) break;
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) r[d] = i + d * threads < n16 ? word(i + d * threads) : make_uint4(0, 0, 0, 0);
  }
  if (v == 0x9E3779B9u) *sink = v;
}

template <int DEPTH = 4>
void read_all(const Tensor& t, uint32_t* sink, int blocks_per_sm) {
  read_only<DEPTH>
      <<<static_cast<unsigned>(multiprocessor_count() * blocks_per_sm), 256, 0, stream()>>>(static_cast<const uint4*>(t.raw()),
                                                                                            static_cast<int64_t>(t.nbytes() / 16), sink);
}

__global__ void fill_random(uint32_t* p, int64_t n, uint32_t seed, uint32_t mask, uint32_t bits) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u + seed;
  h ^= h >> 15;
  h *= 0x85EBCA77u;
  h ^= h >> 13;
  p[i] = (h & mask) | bits;
}

// A random 4-bit g64 weight made on the device (timing only; scales and biases bf16 near 2^-8).
Weight device_weight(int64_t rows, int64_t cols, uint32_t seed) {
  Weight w;
  w.rows = rows;
  w.cols = cols;
  w.quant = QuantParams{4, 64};
  w.name = "stream";
  w.data = Tensor::zeros({rows, cols / 8}, DType::u32, Device::cuda);
  w.scales = Tensor::zeros({rows, cols / 64}, DType::bf16, Device::cuda);
  w.biases = Tensor::zeros({rows, cols / 64}, DType::bf16, Device::cuda);
  const int64_t nc = rows * cols / 8, ns = rows * cols / 128;
  fill_random<<<blocks_for(nc, 256), 256, 0, stream()>>>(w.data.data<uint32_t>(), nc, seed, 0xFFFFFFFFu, 0u);
  fill_random<<<blocks_for(ns, 256), 256, 0, stream()>>>(static_cast<uint32_t*>(w.scales.raw()), ns, seed + 1, 0x807F807Fu, 0x3C003C00u);
  fill_random<<<blocks_for(ns, 256), 256, 0, stream()>>>(static_cast<uint32_t*>(w.biases.raw()), ns, seed + 2, 0x807F807Fu, 0x3C003C00u);
  check_launch("device weight");
  return w;
}

struct Tuning {
  std::string name;
  std::function<void(const tiles::Args&)> launch;
};

// KS warps per row group splitting the columns, for every shape (the shipped launch picks per shape).
template <int KS, int RT, int DEPTH, int MINB>
Tuning fixed_split() {
  return {"tiles ks" + std::to_string(KS) + " rt" + std::to_string(RT) + " depth" + std::to_string(DEPTH) + " blocks" +
              std::to_string(MINB),
          [](const tiles::Args& a) { tiles::launch<__nv_bfloat16, KS, RT, 1, DEPTH, MINB>(a); }};
}

// max_parts: column parts allowed (1: none).
template <int RT, int DEPTH, int MINB>
Tuning tuning(int max_parts = tiles::kMaxParts) {
  return {"tiles rt" + std::to_string(RT) + " depth" + std::to_string(DEPTH) + " blocks" + std::to_string(MINB) +
              " parts<=" + std::to_string(max_parts),
          [max_parts](const tiles::Args& a) { tiles::launch_split<__nv_bfloat16, RT, 1, DEPTH, MINB>(a, max_parts); }};
}

// The decode step's own forms of the four launches (the norm split: the in-projection and the gate/up
// pairs read a scaled input, out_proj and down add into the residual stream) in each loop form
// (tiles::LoopForm): as shipped (kOneRow), with the odd-column sums computed too (the general loop),
// and the two ceilings, codes not unpacked and loads alone, which give wrong sums: what the trim is
// worth and what any trim of the loop could be, timed in turns in one process. Holds what the fused
// ends read and write beside x and y, per weight; the contents do not matter for the time.
class FusedChain {
 public:
  explicit FusedChain(const std::vector<Weight>& tiled) : squares_(Tensor::zeros({4096}, DType::f32, Device::cuda)) {
    for (const Weight& w : tiled) {
      h_.push_back(Tensor::zeros({1, w.rows}, DType::f32, Device::cuda));
      norm_.push_back(Tensor::zeros({w.rows}, DType::f32, Device::cuda));
    }
  }

  // Weight i at `place` in its layer (0 in-projection, 1 out_proj, 2 gate/up, 3 down), from the shipped
  // launch's arguments a (the residual ends write u to a.y).
  template <int FORM>
  void launch(size_t i, size_t place, tiles::Args a) {
    using S = __nv_bfloat16;
    constexpr int RT = 2, GT = 1, DEPTH = 2, MINB = 2;  // matvec_tiles.cu's tuning
    tiles::NormFusion f;
    if (place == 0 || place == 2) {
      f.in_squares = squares_.data<float>();
      f.count = 80;
      f.cols = static_cast<float>(a.k_tiles * 64);
      f.eps = 1e-6f;
      if (place == 0) {
        tiles::launch_split<S, RT, GT, DEPTH, MINB, false, tiles::kScaledIn, FORM>(a, tiles::kMaxParts, f);
      } else {
        a.pair_tiles = a.row_tiles / 2;
        tiles::launch_split<S, RT, GT, DEPTH, MINB, true, tiles::kScaledIn, FORM>(a, tiles::kMaxParts, f);
      }
    } else {
      f.residual = ResidualOut{h_[i].data<float>(), norm_[i].raw(), FloatKind::f32, 0.0f, a.y, squares_.data<float>()};
      tiles::launch_split<S, RT, GT, DEPTH, MINB, false, tiles::kResidualOut, FORM>(a, tiles::kMaxParts, f);
    }
  }

 private:
  Tensor squares_;
  std::vector<Tensor> h_, norm_;
};

}  // namespace

void matvec_layer_stream_report(int layers) {
  struct Shape {
    int64_t rows, cols;
  };
  // One 27B GatedDeltaNet layer in decode: stacked in-projections, out_proj, stacked gate/up, down.
  const std::vector<Shape> layer = {{16480, 5120}, {5120, 6144}, {34816, 5120}, {5120, 17408}};
  std::vector<Weight> rows, tiled;
  std::vector<Tensor> xs, ys;
  size_t bytes = 0;
  uint32_t seed = 7;
  for (int l = 0; l < layers; ++l)
    for (const Shape& s : layer) {
      rows.push_back(device_weight(s.rows, s.cols, seed += 3));
      tiled.push_back(device_weight(s.rows, s.cols, seed += 3));
      tile_weight(tiled.back());
      xs.push_back(Tensor::zeros({1, s.cols}, DType::f32, Device::cuda));
      ys.push_back(Tensor::zeros({1, s.rows}, DType::f32, Device::cuda));
      bytes += rows.back().nbytes();
    }
  Tensor sink = Tensor::zeros({1}, DType::u32, Device::cuda);
  auto report = [&](const std::string& name, const std::function<void(size_t)>& one) {
    const double s = time_graph(
        [&] {
          for (size_t i = 0; i < rows.size(); ++i) one(i);
        },
        5);
    std::printf("layer stream %-32s %8.1f us per layer %6.2f TB/s\n", name.c_str(), s * 1e6 / layers,
                static_cast<double>(bytes) / s / 1e12);
  };
  std::printf("layer stream: %d layers, %.1f MB of weights\n", layers, static_cast<double>(bytes) / 1e6);
  auto shipped_args = [&](size_t i) {  // the tunings load weights as the shipped launch does
    tiles::Args a = tiles::args_of(tiled[i], xs[i].data<float>(), 0, 1, ys[i].data<float>(), 0);
    a.evict_first = true;
    return a;
  };
  report("row layout (matvec_mma)", [&](size_t i) { mma_matvec(xs[i], rows[i], ys[i]); });
  report("tiles as shipped", [&](size_t i) { tiles_matvec(xs[i], tiled[i], ys[i]); });
  for (const Tuning& t :
       {tuning<2, 2, 2>(1), tuning<2, 2, 2>(2), tuning<2, 2, 2>(3), tuning<2, 2, 2>(4), tuning<1, 4, 3>(), tuning<1, 2, 3>(),
        tuning<2, 4, 2>(), tuning<2, 1, 2>(), tuning<2, 2, 1>(), tuning<4, 2, 1>(), fixed_split<4, 2, 2, 2>()})
    report(t.name, [&](size_t i) { t.launch(shipped_args(i)); });
  FusedChain chain(tiled);
  for (int turn = 0; turn < 3; ++turn) {  // in turns: the trim's worth is a few percent at most
    report("fused ends, odd sums skipped", [&](size_t i) { chain.launch<tiles::kOneRow>(i, i % layer.size(), shipped_args(i)); });
    report("fused ends, general loop", [&](size_t i) { chain.launch<tiles::kAllColumns>(i, i % layer.size(), shipped_args(i)); });
    report("fused ends, codes not unpacked", [&](size_t i) { chain.launch<tiles::kRawCodes>(i, i % layer.size(), shipped_args(i)); });
    report("fused ends, loads alone", [&](size_t i) { chain.launch<tiles::kLoadsOnly>(i, i % layer.size(), shipped_args(i)); });
  }
  report("read only (codes, scales, biases)", [&](size_t i) {
    read_all(tiled[i].data, sink.data<uint32_t>(), 8);
    read_all(tiled[i].scales, sink.data<uint32_t>(), 2);
    read_all(tiled[i].biases, sink.data<uint32_t>(), 2);
  });
  for (int blocks : {2, 4})
    report("read only, a launch per weight, early, " + std::to_string(blocks) + " blocks", [&](size_t i) {
      const Weight& w = tiled[i];
      launch_early(read_weight_early<8>, dim3(static_cast<unsigned>(multiprocessor_count() * blocks)), dim3(256), 0,
                   static_cast<const uint4*>(w.data.raw()), static_cast<int64_t>(w.data.nbytes() / 16),
                   static_cast<const uint4*>(w.scales.raw()), static_cast<int64_t>(w.scales.nbytes() / 16),
                   static_cast<const uint4*>(w.biases.raw()), sink.data<uint32_t>());
    });
  // The read ceiling without launch gaps: every weight's codes as one buffer, read in one launch.
  Tensor all = Tensor::zeros({static_cast<int64_t>(bytes / 4)}, DType::u32, Device::cuda);
  for (int blocks : {2, 4, 8}) {
    const double s4 = time_graph([&] { read_all<4>(all, sink.data<uint32_t>(), blocks); }, 5);
    const double s8 = time_graph([&] { read_all<8>(all, sink.data<uint32_t>(), blocks); }, 5);
    std::printf("one read of %.0f MB, %d blocks of 256 per SM: 4 loads in flight %6.2f TB/s, 8 in flight %6.2f TB/s\n",
                static_cast<double>(bytes) / 1e6, blocks, static_cast<double>(bytes) / s4 / 1e12, static_cast<double>(bytes) / s8 / 1e12);
  }
  // Each shape alone, cold (every weight of that shape once per pass, the layers in turn), for the
  // row layout, the shipped launch and each tuning: which shapes a tuning helps or hurts.
  std::vector<std::pair<std::string, std::function<void(size_t)>>> kernels = {{"row layout",
                                                                               [&](size_t i) { mma_matvec(xs[i], rows[i], ys[i]); }},
                                                                              {"tiles as shipped",
                                                                               [&](size_t i) { tiles_matvec(xs[i], tiled[i], ys[i]); }}};
  for (const Tuning& t :
       {tuning<2, 2, 2>(1), tuning<2, 2, 2>(3), tuning<1, 4, 3>(), tuning<1, 2, 3>(), tuning<2, 4, 2>(), fixed_split<4, 2, 2, 2>()})
    kernels.emplace_back(t.name, [&, launch = t.launch](size_t i) { launch(shipped_args(i)); });
  for (size_t s = 0; s < layer.size(); ++s)
    for (const auto& [name, one] : kernels) {
      const double sec = time_graph(
                             [&] {
                               for (int l = 0; l < layers; ++l) one(l * layer.size() + s);
                             },
                             5) /
                         layers;
      std::printf("cold %6lld x %6lld %-28s %7.2f us %6.2f TB/s\n", static_cast<long long>(layer[s].rows),
                  static_cast<long long>(layer[s].cols), name.c_str(), sec * 1e6, static_cast<double>(rows[s].nbytes()) / sec / 1e12);
    }
}

}  // namespace sanctum::test

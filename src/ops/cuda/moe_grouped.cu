// MoE prefill on the device without host grouping: a counting sort of the (token, rank) choices by
// expert, and one grouped mat-mat launch per projection that runs every expert over its own rows.
//
// moe_group: chunks of kChunk ids are counted per expert (shared-memory histograms), one block turns
// the counts into expert offsets and per-chunk starting positions, and one warp per chunk places its
// ids in order (match_any ranks equal ids within a step), so the sort is stable and deterministic.
//
// grouped_expert_matmul (bf16 mode, MLX 4/8-bit or bf16 experts): a tile schedule (one small block)
// counts each expert's row tiles of BM rows; the grid is sized for the worst case (m / BM + E tiles)
// and tiles past the schedule's end exit at once, so no count ever travels to the host. A block
// computes BM grouped rows by BN = 128 output columns of one expert: per 64-column step it loads x
// rows (rounded to bf16 once per call before the launch; gathered through `sorted` when needed) and
// the expert's codes into registers while the previous step multiplies, dequantizes the weights to
// bf16 (scale * code + bias in one f32 fma, as the cuBLAS path's dequantization), stores both into
// padded shared memory, and runs mma.sync m16n8k16 bf16 with f32 accumulators from ldmatrix
// fragments. Each output element's sum
// runs over k in one fixed order whatever rows share its tile, so a row's result never depends on
// the batch. f32 mode and other weight formats take a warp-per-output mat-vec in f32.
#include <cuda_bf16.h>

#include <algorithm>

#include "ops/cuda/blas.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/convert.cuh"
#include "ops/cuda/moe_grouped.h"
#include "ops/cuda/tensor_core.cuh"
#include "ops/precision.h"

namespace sanctum::ops::cuda {

namespace {

constexpr int kChunk = 256;  // ids per counting-sort chunk

// In-place exclusive prefix sum of a[0, n) (shared memory) by the whole block; every thread gets the
// total. blockDim.x is a multiple of 32.
__device__ int32_t block_exclusive_scan(int32_t* a, int n) {
  __shared__ int32_t warp_base[32];
  __shared__ int32_t grand;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int per = (n + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int lo = min(static_cast<int>(threadIdx.x) * per, n), hi = min(lo + per, n);
  int32_t sum = 0;
  for (int i = lo; i < hi; ++i) sum += a[i];
  int32_t inc = sum;
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t v = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += v;
  }
  if (lane == 31) warp_base[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    const int32_t t = lane < warps ? warp_base[lane] : 0;
    int32_t ti = t;
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t v = __shfl_up_sync(0xffffffffu, ti, o);
      if (lane >= o) ti += v;
    }
    if (lane < warps) warp_base[lane] = ti - t;
    if (lane == 31) grand = ti;
  }
  __syncthreads();
  int32_t run = warp_base[warp] + inc - sum;
  for (int i = lo; i < hi; ++i) {
    const int32_t v = a[i];
    a[i] = run;
    run += v;
  }
  __syncthreads();
  return grand;
}

// counts[c * E + e]: ids of chunk c equal to e. blockDim.x == kChunk.
__global__ void group_count(const int32_t* __restrict__ ids, int m, int E, int32_t* __restrict__ counts) {
  extern __shared__ int32_t hist[];
  for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  const int i = blockIdx.x * kChunk + threadIdx.x;
  if (i < m) {
    const int id = ids[i];
    if (id >= 0 && id < E) atomicAdd(&hist[id], 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) counts[static_cast<int64_t>(blockIdx.x) * E + e] = hist[e];
}

// One block: offsets[e] = ids before expert e's; counts[c][e] becomes the position of chunk c's
// first id of expert e.
__global__ void group_scan(int32_t* __restrict__ counts, int chunks, int E, int32_t* __restrict__ offsets) {
  extern __shared__ int32_t total[];
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t run = 0;
    for (int c = 0; c < chunks; ++c) {
      const int32_t v = counts[static_cast<int64_t>(c) * E + e];
      counts[static_cast<int64_t>(c) * E + e] = run;
      run += v;
    }
    total[e] = run;
  }
  __syncthreads();
  const int32_t all = block_exclusive_scan(total, E);
  for (int e = threadIdx.x; e < E; e += blockDim.x) offsets[e] = total[e];
  if (threadIdx.x == 0) offsets[E] = all;
  for (int64_t i = threadIdx.x; i < static_cast<int64_t>(chunks) * E; i += blockDim.x) counts[i] += total[i % E];
}

// One warp per chunk, 32 ids a step in order: an id's place is its expert's next free position
// plus its rank among the step's equal ids.
__global__ void group_place(const int32_t* __restrict__ ids, int m, int E, const int32_t* __restrict__ starts,
                            int32_t* __restrict__ sorted) {
  extern __shared__ int32_t next[];
  const int c = blockIdx.x, lane = threadIdx.x;
  for (int e = lane; e < E; e += 32) next[e] = starts[static_cast<int64_t>(c) * E + e];
  __syncwarp();
  const int end = min(m, (c + 1) * kChunk);
  for (int base = c * kChunk; base < end; base += 32) {
    const int i = base + lane;
    const int id = i < end ? ids[i] : -1;
    const bool valid = id >= 0 && id < E;
    const unsigned peers = __match_any_sync(0xffffffffu, valid ? id : -1);
    const int rank = __popc(peers & ((1u << lane) - 1u));
    if (valid) sorted[next[id] + rank] = i;
    __syncwarp();
    if (valid && rank == 0) next[id] += __popc(peers);
    __syncwarp();
  }
}

// moe_expert_tasks in one block: the ids staged in shared memory, each expert's count (shared atomics:
// exact in any order), its first task (a scan of its task counts), and each slot's place from its rank
// among the earlier slots of its expert, so the tasks come out the same every time.
__global__ void expert_tasks(const int32_t* __restrict__ ids, int m, int E, int32_t* __restrict__ tasks) {
  extern __shared__ int32_t shared[];
  int32_t *id = shared, *count = shared + m, *first = count + E;
  wait_for_previous();  // the ids come from the routing ahead
  allow_next_early();
  for (int e = threadIdx.x; e < E; e += blockDim.x) count[e] = 0;
  for (int s = threadIdx.x; s < m; s += blockDim.x) id[s] = ids[s];
  __syncthreads();
  for (int s = threadIdx.x; s < m; s += blockDim.x)
    if (id[s] >= 0 && id[s] < E) atomicAdd(&count[id[s]], 1);
  __syncthreads();
  constexpr int kSlots = static_cast<int>(kExpertTaskSlots);
  for (int e = threadIdx.x; e < E; e += blockDim.x) first[e] = (count[e] + kSlots - 1) / kSlots;
  __syncthreads();
  const int32_t all = block_exclusive_scan(first, E);
  if (threadIdx.x == 0) tasks[0] = all;
  for (int s = threadIdx.x; s < m; s += blockDim.x) {
    const int32_t e = id[s];
    if (e < 0 || e >= E) continue;  // routing never writes one; a task slot is not made of it
    int rank = 0;
    for (int j = 0; j < s; ++j) rank += id[j] == e;
    int32_t* task = tasks + 1 + static_cast<int64_t>(first[e] + rank / kSlots) * kExpertTaskWords;
    task[2 + rank % kSlots] = s;
    if (rank % kSlots == 0) {
      task[0] = e;
      task[1] = min(kSlots, count[e] - rank);
    }
  }
}

// tiles[e] = row tiles of bm rows before expert e's; tiles[E] = all of them.
__global__ void tile_schedule(const int32_t* __restrict__ offsets, int E, int bm, int32_t* __restrict__ tiles) {
  extern __shared__ int32_t t[];
  for (int e = threadIdx.x; e < E; e += blockDim.x) t[e] = (offsets[e + 1] - offsets[e] + bm - 1) / bm;
  __syncthreads();
  const int32_t all = block_exclusive_scan(t, E);
  for (int e = threadIdx.x; e < E; e += blockDim.x) tiles[e] = t[e];
  if (threadIdx.x == 0) tiles[E] = all;
}

// The last e with starts[e] <= v (starts non-decreasing, starts[0] <= v): with v below starts[E],
// an expert that owns v.
__device__ __forceinline__ int owner(const int32_t* __restrict__ starts, int E, int v) {
  int lo = 0, hi = E - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (starts[mid] <= v) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// ---- grouped tensor-core mat-mat ----

constexpr int kBN = 128, kBK = 64, kLds = kBK + 8, kThreads = 256;  // kLds: padded row (bf16), ldmatrix without bank conflicts

using tc::bf16_pair;
using tc::ldmatrix_x4;
using tc::mma_bf16;

// Exact float of a code of at most 8 bits: placed in the low mantissa of 2^23 by a byte permute.
__device__ __forceinline__ float code_at(uint32_t bytes, int k) {
  return __uint_as_float(__byte_perm(bytes, 0x4B000000u, 0x7440u | k)) - 8388608.0f;
}

// 32 consecutive weights of one row as bf16 (16 words, lowest column in the low half).
template <int BITS>
__device__ __forceinline__ void dequantize32(const uint4 (&q)[BITS == 16 ? 4 : BITS / 4], float s, float b, uint32_t (&out)[16]) {
  if constexpr (BITS == 16) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[4 * i] = q[i].x;
      out[4 * i + 1] = q[i].y;
      out[4 * i + 2] = q[i].z;
      out[4 * i + 3] = q[i].w;
    }
  } else if constexpr (BITS == 4) {
    const uint32_t words[4] = {q[0].x, q[0].y, q[0].z, q[0].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = words[i] & 0x0F0F0F0Fu, hi = (words[i] >> 4) & 0x0F0F0F0Fu;  // codes 0,2,4,6 and 1,3,5,7
#pragma unroll
      for (int k = 0; k < 4; ++k) out[4 * i + k] = bf16_pair(fmaf(s, code_at(lo, k), b), fmaf(s, code_at(hi, k), b));
    }
  } else {
    const uint32_t words[8] = {q[0].x, q[0].y, q[0].z, q[0].w, q[1].x, q[1].y, q[1].z, q[1].w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      out[2 * i] = bf16_pair(fmaf(s, code_at(words[i], 0), b), fmaf(s, code_at(words[i], 1), b));
      out[2 * i + 1] = bf16_pair(fmaf(s, code_at(words[i], 2), b), fmaf(s, code_at(words[i], 3), b));
    }
  }
}

// BITS 4 / 8: MLX codes with S scales and biases; 16: dense bf16 rows (S unused). TILED: 4-bit weights
// reordered for the decode mat-vec (WeightLayout::tiles, matvec_tiles.cuh).
// Grid: x = row tiles (worst case), y = column blocks of kBN.
template <int BITS, class S, int BM, bool TILED = false>
__global__ void __launch_bounds__(kThreads, 2)
    grouped_mma(const int64_t* __restrict__ table, const int32_t* __restrict__ offsets, const int32_t* __restrict__ tiles, int E,
                const int32_t* __restrict__ sorted, bool gather, int fan, int64_t row_bytes, int64_t s_stride, int group_shift, int N,
                int K, const __nv_bfloat16* __restrict__ x, float* __restrict__ y, int64_t y_stride) {
  constexpr int WM = BM >= 64 ? 2 : 1, WN = 8 / WM;    // warps along rows and columns
  constexpr int MF = BM / WM / 16, NF = kBN / WN / 8;  // m16 and n8 fragments per warp
  constexpr int XR = BM >= 32 ? BM / 32 : 1;           // x rows per thread per step (8 values each)
  constexpr int QV = BITS == 16 ? 4 : BITS / 4;        // uint4s holding a thread's 32 weights
  static_assert(NF % 2 == 0 && MF >= 1, "tile shape");
  __shared__ __align__(16) __nv_bfloat16 sa[BM * kLds];
  __shared__ __align__(16) __nv_bfloat16 sb[kBN * kLds];

  const int tile = blockIdx.x;
  if (tile >= tiles[E]) return;
  const int e = owner(tiles, E, tile);
  const int row0 = offsets[e] + (tile - tiles[e]) * BM, count = min(BM, offsets[e + 1] - row0);
  const int col0 = blockIdx.y * kBN;
  const int64_t* ent = table + 3 * e;
  const uint8_t* codes = reinterpret_cast<const uint8_t*>(ent[0]);
  const S* scales = reinterpret_cast<const S*>(ent[1]);
  const S* biases = reinterpret_cast<const S*>(ent[2]);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // x rows this thread loads: r = tid / 8 + 32 i, values 8 (tid % 8) .. + 7 of each step. x is bf16
  // (K values a row), rounded once for the whole call.
  const __nv_bfloat16* xrow[XR];
#pragma unroll
  for (int i = 0; i < XR; ++i) {
    const int r = tid / 8 + 32 * i;
    xrow[i] = nullptr;
    if (r < count) {
      const int j = row0 + r;
      xrow[i] = x + static_cast<int64_t>(gather ? sorted[j] / fan : j) * K + (tid % 8) * 8;
    }
  }
  // Weight row n = tid / 2 (clamped past N: computed, never written), columns 32 (tid % 2) of a step.
  const int wn = tid / 2, half = tid % 2;
  const int64_t wrow = min(col0 + wn, N - 1);
  const uint8_t* wp = codes + wrow * row_bytes + half * (BITS == 16 ? 64 : 4 * BITS);

  uint4 xv[XR];
  uint4 qv[QV];
  float sc = 0.0f, bi = 0.0f;
  auto fetch = [&](int kt) {
#pragma unroll
    for (int i = 0; i < XR; ++i) xv[i] = xrow[i] ? *reinterpret_cast<const uint4*>(xrow[i] + kt * kBK) : make_uint4(0u, 0u, 0u, 0u);
    if constexpr (TILED) {
      // The row's 32 codes of this half step: 8 bytes in each of lanes 4 g + 2 half and + 1 of the
      // (row tile, column tile)'s 512, at byte 8 h for row g + 8 h of the tile.
      const int64_t rt = wrow >> 4;
      const int g = static_cast<int>(wrow & 7), h = static_cast<int>((wrow >> 3) & 1), lane0 = 4 * g + 2 * half;
      const uint8_t* tile = codes + (rt * (K / kBK) + kt) * 512;
      const uint2 lo = __ldg(reinterpret_cast<const uint2*>(tile + lane0 * 16 + h * 8));
      const uint2 hi = __ldg(reinterpret_cast<const uint2*>(tile + (lane0 + 1) * 16 + h * 8));
      qv[0] = make_uint4(lo.x, lo.y, hi.x, hi.y);
      const int64_t at = (rt * (K >> group_shift) + ((kt * kBK + half * 32) >> group_shift)) * 16 + 2 * g + h;
      sc = to_f(scales[at]);
      bi = to_f(biases[at]);
    } else {
      const uint4* p = reinterpret_cast<const uint4*>(wp + static_cast<int64_t>(kt) * (BITS == 16 ? 128 : 8 * BITS));
#pragma unroll
      for (int i = 0; i < QV; ++i) qv[i] = __ldg(p + i);
    }
    if constexpr (BITS != 16 && !TILED) {
      const int g = (kt * kBK + half * 32) >> group_shift;
      sc = to_f(scales[wrow * s_stride + g]);
      bi = to_f(biases[wrow * s_stride + g]);
    }
  };
  auto stage = [&]() {
#pragma unroll
    for (int i = 0; i < XR; ++i)
      if (tid / 8 + 32 * i < BM) *reinterpret_cast<uint4*>(sa + (tid / 8 + 32 * i) * kLds + (tid % 8) * 8) = xv[i];
    uint32_t w[16];
    dequantize32<BITS>(qv, sc, bi, w);
    uint4* dst = reinterpret_cast<uint4*>(sb + wn * kLds + half * 32);
#pragma unroll
    for (int i = 0; i < 4; ++i) dst[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
  };

  float acc[MF][NF][4];
#pragma unroll
  for (int a = 0; a < MF; ++a)
#pragma unroll
    for (int b = 0; b < NF; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[a][b][i] = 0.0f;

  const int wm = warp / WN, wcol = warp % WN;
  const __nv_bfloat16* a_base = sa + (wm * (BM / WM) + (lane & 15)) * kLds + (lane >> 4) * 8;
  const __nv_bfloat16* b_base = sb + (wcol * (kBN / WN) + (lane & 7) + ((lane >> 4) << 3)) * kLds + ((lane >> 3) & 1) * 8;
  const int steps = K / kBK;
  fetch(0);
  stage();
  __syncthreads();
  for (int kt = 0; kt < steps; ++kt) {
    if (kt + 1 < steps) fetch(kt + 1);  // in flight while this step multiplies
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      uint32_t af[MF][4], bf[NF][2];
#pragma unroll
      for (int a = 0; a < MF; ++a) ldmatrix_x4(af[a], a_base + a * 16 * kLds + ks * 16);
#pragma unroll
      for (int p = 0; p < NF / 2; ++p) {
        uint32_t r[4];
        ldmatrix_x4(r, b_base + p * 16 * kLds + ks * 16);
        bf[2 * p][0] = r[0];
        bf[2 * p][1] = r[1];
        bf[2 * p + 1][0] = r[2];
        bf[2 * p + 1][1] = r[3];
      }
#pragma unroll
      for (int a = 0; a < MF; ++a)
#pragma unroll
        for (int b = 0; b < NF; ++b) mma_bf16(acc[a][b], af[a], bf[b][0], bf[b][1]);
    }
    if (kt + 1 < steps) {
      __syncthreads();
      stage();
      __syncthreads();
    }
  }

  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int a = 0; a < MF; ++a)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wm * (BM / WM) + a * 16 + g + 8 * h;
      if (r >= count) continue;
      const int j = row0 + r;
      float* yr = y + static_cast<int64_t>(gather ? j : sorted[j]) * y_stride;
#pragma unroll
      for (int b = 0; b < NF; ++b) {
        const int col = col0 + wcol * (kBN / WN) + b * 8 + 2 * t;
        if (col < N) yr[col] = acc[a][b][2 * h];
        if (col + 1 < N) yr[col + 1] = acc[a][b][2 * h + 1];
      }
    }
}

// f32 products and sums (exact mode, and formats the tensor-core kernel does not read): one warp per
// (grouped row j = blockIdx.x, output row). `w` describes every expert but the addresses.
__global__ void grouped_generic(const int64_t* __restrict__ table, const int32_t* __restrict__ offsets, int E,
                                const int32_t* __restrict__ sorted, bool gather, int fan, WeightView w, int64_t N, int64_t K,
                                const float* __restrict__ x, int64_t x_stride, float* __restrict__ y, int64_t y_stride) {
  constexpr int kWarps = 8;
  const int j = blockIdx.x, lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
  if (j >= offsets[E] || row >= N) return;
  const int64_t* ent = table + 3 * owner(offsets, E, j);
  if (w.codes != nullptr) {
    w.codes = reinterpret_cast<const uint32_t*>(ent[0]);
    w.scales = reinterpret_cast<const void*>(ent[1]);
    w.biases = reinterpret_cast<const void*>(ent[2]);
  } else {
    w.dense = reinterpret_cast<const void*>(ent[0]);
  }
  const float* xr = x + static_cast<int64_t>(gather ? sorted[j] / fan : j) * x_stride;
  float acc = 0.0f;
  for (int64_t c = lane; c < K; c += 32) acc = fmaf(weight_at(w, row, c), xr[c], acc);
  acc = warp_sum(acc);
  if (lane == 0) y[static_cast<int64_t>(gather ? j : sorted[j]) * y_stride + row] = acc;
}

Tensor& counts_scratch() {
  static Tensor t;
  return t;
}
Tensor& tiles_scratch() {
  static Tensor t;
  return t;
}
Tensor& x_bf16_scratch() {
  static Tensor t;
  return t;
}

// Formats and layouts grouped_mma reads: MLX 4/8-bit with groups of 32/64/128 or dense bf16; rows of
// whole 16-byte vectors; 64-column steps.
bool mma_ok(const ExpertSet& experts, const Tensor& x) {
  const Weight& w = experts[0];
  if (w.cols % kBK != 0 || w.cols >= (int64_t{1} << 30) || w.rows >= (int64_t{1} << 30) || !aligned16(x.raw()) || x.stride(0) % 4 != 0)
    return false;
  if (w.quantized()) {
    if (!((w.quant.bits == 4 || w.quant.bits == 8) && (w.quant.group_size == 32 || w.quant.group_size == 64 || w.quant.group_size == 128) &&
          w.data.stride(0) % 4 == 0 && w.data.stride(0) * 32 == w.cols * w.quant.bits))
      return false;
  } else if (!(w.data.dtype() == DType::bf16 && w.data.stride(0) % 8 == 0)) {
    return false;
  }
  for (int64_t e = 0; e < experts.size(); ++e)
    if (!aligned16(experts[e].data.raw())) return false;
  return true;
}

struct Launch {
  const int64_t* table;
  const int32_t* offsets;
  int32_t* tiles;
  int E;
  const int32_t* sorted;
  bool gather;
  int fan;
  int64_t row_bytes, s_stride;
  int shift, N, K;
  const __nv_bfloat16* x;  // (rows of x, K) bf16
  float* y;
  int64_t ys;
};

template <int BITS, class S, int BM, bool TILED = false>
void launch_mma(const Launch& a, int64_t m) {
  tile_schedule<<<1, 1024, static_cast<size_t>(a.E) * 4, stream()>>>(a.offsets, a.E, BM, a.tiles);
  check_launch("grouped_expert_matmul schedule");
  const int64_t worst = m / BM + std::min<int64_t>(a.E, m);
  const dim3 grid(static_cast<unsigned>(worst), static_cast<unsigned>((a.N + kBN - 1) / kBN));
  grouped_mma<BITS, S, BM, TILED><<<grid, kThreads, 0, stream()>>>(a.table, a.offsets, a.tiles, a.E, a.sorted, a.gather, a.fan, a.row_bytes,
                                                                   a.s_stride, a.shift, a.N, a.K, a.x, a.y, a.ys);
}

// Rows per tile from the mean rows per expert: few rows per expert waste less of a small tile.
template <int BITS, class S, bool TILED = false>
void launch_rows(const Launch& a, int64_t m) {
  const int64_t mean = m / a.E;
  if (mean >= 48) launch_mma<BITS, S, 64, TILED>(a, m);
  else if (mean >= 20) launch_mma<BITS, S, 32, TILED>(a, m);
  else launch_mma<BITS, S, 16, TILED>(a, m);
}

template <int BITS>
void launch_bits(const Launch& a, int64_t m, DType scale_type) {
  switch (scale_type) {
    case DType::bf16: return launch_rows<BITS, __nv_bfloat16>(a, m);
    case DType::f16: return launch_rows<BITS, __half>(a, m);
    default: return launch_rows<BITS, float>(a, m);
  }
}

}  // namespace

void moe_group(const Tensor& ids, int64_t n_experts, Tensor& offsets, Tensor& sorted) {
  const int m = static_cast<int>(ids.numel()), E = static_cast<int>(n_experts);
  const int chunks = std::max(1, (m + kChunk - 1) / kChunk);
  auto* counts = static_cast<int32_t*>(scratch_bytes(counts_scratch(), static_cast<size_t>(chunks) * static_cast<size_t>(E) * 4));
  const size_t smem = static_cast<size_t>(E) * 4;
  check(smem <= 48 * 1024, ErrorKind::unsupported, "[moe_group] at most 12288 experts on cuda");
  group_count<<<static_cast<unsigned>(chunks), kChunk, smem, stream()>>>(ids.data<int32_t>(), m, E, counts);
  group_scan<<<1, 1024, smem, stream()>>>(counts, chunks, E, offsets.data<int32_t>());
  if (m > 0) group_place<<<static_cast<unsigned>(chunks), 32, smem, stream()>>>(ids.data<int32_t>(), m, E, counts, sorted.data<int32_t>());
  check_launch("moe_group");
}

bool expert_tasks_fit(int64_t m, int64_t n_experts) { return (m + 2 * n_experts) * 4 <= kExpertTaskSharedBytes; }

void moe_expert_tasks(const Tensor& ids, int64_t n_experts, Tensor& tasks) {
  const int64_t m = ids.numel();
  check(expert_tasks_fit(m, n_experts), ErrorKind::unsupported, "[moe_expert_tasks] too many slots or experts for one block on cuda");
  const size_t smem = static_cast<size_t>(m + 2 * n_experts) * 4;
  launch_early(expert_tasks, dim3(1), dim3(1024), smem, ids.data<int32_t>(), static_cast<int>(m), static_cast<int>(n_experts),
               tasks.data<int32_t>());
  check_launch("moe_expert_tasks");
}

void grouped_expert_matmul(const Tensor& x, const ExpertSet& experts, const Tensor& offsets, const Tensor& sorted, GroupedRows mode,
                           Tensor& y) {
  const Weight& w = experts[0];
  const int64_t m = sorted.numel(), E = experts.size();
  const bool gather = mode == GroupedRows::gather;
  const int fan = static_cast<int>(gather ? m / x.dim(0) : 1);
  check(m < (int64_t{1} << 31) && E * 4 <= 48 * 1024, ErrorKind::unsupported, "[grouped_expert_matmul] too many rows or experts for cuda");
  const int64_t* table = experts.device_table().data<int64_t>();
  if (matmul_precision() != MatmulPrecision::f32 && mma_ok(experts, x)) {
    auto* tiles = static_cast<int32_t*>(scratch_bytes(tiles_scratch(), static_cast<size_t>(E + 1) * 4));
    // x rounded to bf16 once: every tile then reads half the bytes (a row is read once per column
    // block, and a token's row once per expert it chose).
    const int64_t xn = x.dim(0), K = x.dim(1);
    auto* xb = static_cast<__nv_bfloat16*>(scratch_bytes(x_bf16_scratch(), static_cast<size_t>(xn * K) * 2));
    rows_to_bf16(x.data<float>(), x.stride(0), xn, K, xb);
    const bool q = w.quantized();
    const Launch a{table,
                   offsets.data<int32_t>(),
                   tiles,
                   static_cast<int>(E),
                   sorted.data<int32_t>(),
                   gather,
                   fan,
                   q ? w.data.stride(0) * 4 : w.data.stride(0) * 2,
                   q ? w.scales.stride(0) : 0,
                   q ? __builtin_ctz(static_cast<unsigned>(w.quant.group_size)) : 0,
                   static_cast<int>(w.rows),
                   static_cast<int>(w.cols),
                   xb,
                   y.data<float>(),
                   y.stride(0)};
    if (!q) launch_mma<16, float, 64>(a, m);  // dense rows: no dequantization to amortise, one tile shape
    else if (w.layout == WeightLayout::tiles && w.scales.dtype() == DType::bf16) launch_rows<4, __nv_bfloat16, true>(a, m);
    else if (w.layout == WeightLayout::tiles) launch_rows<4, __half, true>(a, m);
    else if (w.quant.bits == 4) launch_bits<4>(a, m, w.scales.dtype());
    else launch_bits<8>(a, m, w.scales.dtype());
    check_launch("grouped_expert_matmul");
    return;
  }
  constexpr int kWarps = 8;
  const dim3 grid(static_cast<unsigned>(m), blocks_for(w.rows, kWarps));
  grouped_generic<<<grid, kWarps * 32, 0, stream()>>>(table, offsets.data<int32_t>(), static_cast<int>(E), sorted.data<int32_t>(), gather,
                                                      fan, weight_view(w), w.rows, w.cols, x.data<float>(), x.stride(0), y.data<float>(),
                                                      y.stride(0));
  check_launch("grouped_expert_matmul");
}

}  // namespace sanctum::ops::cuda

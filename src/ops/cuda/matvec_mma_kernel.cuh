#pragma once
// The tensor-core 4-bit mat-vec kernel as a template over its tuning knobs, so that matvec_mma.cu
// instantiates the chosen shape and a perf test can time the others.
//
// A warp takes RT tiles of 16 rows by 64 columns at a time, straight from the MLX layout: lane
// (g = lane / 4, t = lane % 4) loads codes 16t..16t+15 of rows g and g + 8 (8 contiguous bytes
// each, so a row's 32 bytes come from four neighbouring lanes). A dot product may visit its columns
// in any order, so the k slots of each m16n8k16 step are assigned to whatever columns the lane's
// codes already hold, and x is loaded in the same order: B column c is x row c (n <= 8 rows share
// the work for free). Codes enter as bf16 128 + q; the 128 is taken back out with the column sums
// of bf16(x), which one more mma with an all-ones A yields where each lane needs them. Per group,
// y += scale * sum(code * x) + bias * sum(x).
//
// Knobs: RT row tiles per warp, KS warps splitting a row group's columns, DEPTH column tiles of
// codes, scales and biases in flight per warp, MINB blocks per multiprocessor (the register cap),
// XS: x staged once per block in shared memory as the lanes' bf16 pairs (same values, same sums:
// the results are bitwise those of the unstaged kernel). The shipped tuning (matvec_mma.cu) is the
// fastest the perf test found on an H200: depth 2, 3 blocks, x not staged (staging was 0-10% slower).
#include <cuda_bf16.h>

#include "ops/cuda/common.cuh"
#include "ops/cuda/tensor_core.cuh"

namespace sanctum::ops::cuda::mma {

constexpr int kWarps = 8;  // per block: kWarps / KS row groups of RT tiles, KS warps each

using tc::bf16_pair;
using tc::mma_bf16;

// bf16 pair (128 + code j, 128 + code j + 4) of a word of eight 4-bit codes.
__device__ __forceinline__ uint32_t code_pair(uint32_t w, int j) { return ((w >> (4 * j)) & 0x000F000Fu) | 0x43004300u; }

// Staged x: per x row, per column tile, per lane t, the eight bf16 pairs of its B fragments; rows
// padded by four words so that the rows of one load fall in different banks.
__host__ __device__ constexpr int64_t staged_row_words(int64_t k_tiles) { return k_tiles * 32 + 4; }
// Word w = 2s + h of lane t holds x columns 16t + 8(s/2) + 2(s%2) + h and that + 4.
__device__ __forceinline__ int staged_column(int t, int w) { return 16 * t + 8 * (w >> 2) + 2 * ((w >> 1) & 1) + (w & 1); }

// The KS warps of a row group meet in shared memory: each leaves its RT x 4 sums, and the group's
// first warp (slice 0) adds the others' in warp order. Every thread of the block calls this.
template <int KS, int RT>
__device__ __forceinline__ void add_slices(float (*partial)[RT][4][32], float (&acc)[RT][4], int warp, int lane, int slice) {
  if constexpr (KS > 1) {
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][r][i][lane] = acc[r][i];
    __syncthreads();
    if (slice == 0)
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int w = 1; w < KS; ++w) acc[r][i] += partial[warp + w][r][i][lane];
  }
}

struct Args {
  const uint8_t* codes;
  int64_t row_bytes;
  const void* scales;
  const void* biases;
  int64_t s_stride;
  int group_shift;
  int64_t rows;
  int k_tiles;
  const float* x;
  int64_t x_stride;
  int n;
  float* y;
  int64_t y_stride;
};

// Grid: one block per kWarps / KS groups of RT row tiles; a group's KS warps split the 64-column
// tiles. y (n, rows) f32.
template <class S, int RT, int KS, int DEPTH, int MINB, bool XS>
__global__ void __launch_bounds__(kWarps * 32, MINB) matvec(Args a) {
  __shared__ float partial[KS > 1 ? kWarps : 1][RT][4][32];
  extern __shared__ uint4 staged_raw[];
  const uint32_t* staged = reinterpret_cast<const uint32_t*>(staged_raw);
  const S* __restrict__ scales = static_cast<const S*>(a.scales);
  const S* __restrict__ biases = static_cast<const S*>(a.biases);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, slice = warp % KS;
  const int64_t tile0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / KS) + warp / KS) * RT;
  const int k_tiles = a.k_tiles, n = a.n;
  int64_t row_g[RT];
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const int64_t tile = tile0 + r < a.rows / 16 ? tile0 + r : a.rows / 16 - 1;  // past the end: recompute the last tile, not written
    row_g[r] = tile * 16 + g;
  }
  const float* xg = a.x + (g < n ? g : 0) * a.x_stride + 16 * t;
  const uint32_t ones = 0x3F803F80u;  // bf16 (1, 1)

  float acc[RT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[r][i] = 0.0f;

  struct Codes {
    uint2 lo[RT], hi[RT];                                    // codes 16t..16t+15 of rows g and g + 8 of each row tile
    S scale_lo[RT], bias_lo[RT], scale_hi[RT], bias_hi[RT];  // their group's scale and bias
  };
  auto fetch = [&](Codes& c, int kt) {
    const int grp = (kt * 64) >> a.group_shift;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const uint8_t* p = a.codes + row_g[r] * a.row_bytes + kt * 32 + t * 8;
      c.lo[r] = __ldcs(reinterpret_cast<const uint2*>(p));
      c.hi[r] = __ldcs(reinterpret_cast<const uint2*>(p + 8 * a.row_bytes));
      c.scale_lo[r] = scales[row_g[r] * a.s_stride + grp];
      c.bias_lo[r] = biases[row_g[r] * a.s_stride + grp];
      c.scale_hi[r] = scales[(row_g[r] + 8) * a.s_stride + grp];
      c.bias_hi[r] = biases[(row_g[r] + 8) * a.s_stride + grp];
    }
  };
  auto process = [&](const Codes& cw, int kt) {
    // B fragments: step s holds x at columns 8(s/2) + 2(s%2) + {0, 4} and + {1, 5} of the lane's 16.
    uint32_t b[4][2];
    if (g < n) {
      if constexpr (XS) {
        const uint4* sp = reinterpret_cast<const uint4*>(staged + g * staged_row_words(k_tiles) + (kt * 4 + t) * 8);
        const uint4 u0 = sp[0], u1 = sp[1];
        b[0][0] = u0.x, b[0][1] = u0.y, b[1][0] = u0.z, b[1][1] = u0.w;
        b[2][0] = u1.x, b[2][1] = u1.y, b[3][0] = u1.z, b[3][1] = u1.w;
      } else {
        const float4* xp = reinterpret_cast<const float4*>(xg + kt * 64);
        const float4 v0 = xp[0], v1 = xp[1], v2 = xp[2], v3 = xp[3];
        b[0][0] = bf16_pair(v0.x, v1.x);
        b[0][1] = bf16_pair(v0.y, v1.y);
        b[1][0] = bf16_pair(v0.z, v1.z);
        b[1][1] = bf16_pair(v0.w, v1.w);
        b[2][0] = bf16_pair(v2.x, v3.x);
        b[2][1] = bf16_pair(v2.y, v3.y);
        b[3][0] = bf16_pair(v2.z, v3.z);
        b[3][1] = bf16_pair(v2.w, v3.w);
      }
    } else {
#pragma unroll
      for (int s = 0; s < 4; ++s) b[s][0] = b[s][1] = 0u;
    }
    float xsum[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // [0], [1]: sums of bf16(x) for columns 2t, 2t + 1
#pragma unroll
    for (int s = 0; s < 4; ++s) mma_bf16(xsum, ones, ones, ones, ones, b[s][0], b[s][1]);

#pragma unroll
    for (int r = 0; r < RT; ++r) {
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint32_t wl = (s >> 1) ? cw.lo[r].y : cw.lo[r].x, wh = (s >> 1) ? cw.hi[r].y : cw.hi[r].x;
        const int j = 2 * (s & 1);
        mma_bf16(c, code_pair(wl, j), code_pair(wh, j), code_pair(wl, j + 1), code_pair(wh, j + 1), b[s][0], b[s][1]);
      }
      const float sg = to_f(cw.scale_lo[r]), bg = to_f(cw.bias_lo[r]);
      const float sh = to_f(cw.scale_hi[r]), bh = to_f(cw.bias_hi[r]);
      const float og = fmaf(-128.0f, sg, bg), oh = fmaf(-128.0f, sh, bh);  // bias with the codes' 128 taken out
      acc[r][0] = fmaf(sg, c[0], fmaf(og, xsum[0], acc[r][0]));
      acc[r][1] = fmaf(sg, c[1], fmaf(og, xsum[1], acc[r][1]));
      acc[r][2] = fmaf(sh, c[2], fmaf(oh, xsum[0], acc[r][2]));
      acc[r][3] = fmaf(sh, c[3], fmaf(oh, xsum[1], acc[r][3]));
    }
  };

  // DEPTH tiles in flight per warp: each tile's loads are issued DEPTH tiles before it is used.
  Codes buf[DEPTH];
#pragma unroll
  for (int d = 0; d < DEPTH; ++d)
    if (slice + d * KS < k_tiles) fetch(buf[d], slice + d * KS);
  if constexpr (XS) {
    uint32_t* fill = reinterpret_cast<uint32_t*>(staged_raw);
    const int64_t words = static_cast<int64_t>(k_tiles) * 32;
    for (int r = 0; r < n; ++r)
      for (int64_t i = threadIdx.x; i < words; i += blockDim.x) {
        const int64_t kt = i >> 5;
        const int tw = static_cast<int>(i & 31), col = static_cast<int>(kt * 64) + staged_column(tw >> 3, tw & 7);
        const float* xr = a.x + r * a.x_stride;
        fill[r * staged_row_words(k_tiles) + i] = bf16_pair(xr[col], xr[col + 4]);
      }
    __syncthreads();
  }
  for (int kt = slice; kt < k_tiles; kt += DEPTH * KS) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      const int at = kt + d * KS;
      if (at < k_tiles) {
        process(buf[d], at);
        if (at + DEPTH * KS < k_tiles) fetch(buf[d], at + DEPTH * KS);
      }
    }
  }

  add_slices<KS, RT>(partial, acc, warp, lane, slice);
  if (slice != 0) return;
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    if (tile0 + r >= a.rows / 16) break;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = 2 * t + (i & 1);
      const int64_t row = row_g[r] + (i >> 1) * 8;
      if (col < n) a.y[col * a.y_stride + row] = acc[r][i];
    }
  }
}

inline Args args_of(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  return Args{static_cast<const uint8_t*>(w.data.raw()),
              w.data.stride(0) * 4,
              w.scales.raw(),
              w.biases.raw(),
              w.scales.stride(0),
              __builtin_ctz(static_cast<unsigned>(w.quant.group_size)),
              w.rows,
              static_cast<int>(w.cols / 64),
              x,
              xs,
              n,
              y,
              ys};
}

// Most bytes of staged x a block takes without opting into more shared memory (the partial sums
// take the rest of the default 48 KiB).
constexpr int64_t kMaxStagedBytes = 40 * 1024;

inline int64_t staged_bytes(int64_t n, int64_t k_tiles) { return n * staged_row_words(k_tiles) * 4; }

template <class S, int RT, int KS, int DEPTH, int MINB, bool XS>
void launch(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  constexpr int64_t tiles_per_block = kWarps / KS * RT;
  const auto blocks = static_cast<unsigned>((w.rows / 16 + tiles_per_block - 1) / tiles_per_block);
  const size_t smem = XS ? static_cast<size_t>(staged_bytes(n, w.cols / 64)) : 0;
  matvec<S, RT, KS, DEPTH, MINB, XS><<<blocks, kWarps * 32, smem, stream()>>>(args_of(w, x, xs, n, y, ys));
}

}  // namespace sanctum::ops::cuda::mma

// 4-bit mat-vec on the tensor cores, for the bf16 precision mode (x rounded to bf16, f32 sums):
// the f32 mat-vec spends about three instructions per weight decoding and multiplying, which caps
// it near a third of the H200's bandwidth; here a weight costs about one (its code lands in a bf16
// register with one mask-and-or), and mma.sync does the multiplying.
//
// A warp takes RT tiles of 16 rows by 64 columns at a time, straight from the MLX layout: lane
// (g = lane / 4, t = lane % 4) loads codes 16t..16t+15 of rows g and g + 8 (8 contiguous bytes
// each, so a row's 32 bytes come from four neighbouring lanes). A dot product may visit its columns
// in any order, so the k slots of each m16n8k16 step are assigned to whatever columns the lane's
// codes already hold, and x is loaded in the same order: B column c is x row c (n <= 8 rows share
// the work for free). Codes enter as bf16 128 + q; the 128 is taken back out with the column sums
// of bf16(x), which one more mma with an all-ones A yields where each lane needs them. Per group,
// y += scale * sum(code * x) + bias * sum(x).
#include <cuda_bf16.h>

#include "ops/cuda/common.cuh"
#include "ops/cuda/matvec_mma.cuh"

namespace sanctum::ops::cuda {

namespace {

constexpr int kWarps = 8;  // per block: kWarps / KS row groups of RT tiles, KS warps each

__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// bf16 pair (128 + code j, 128 + code j + 4) of a word of eight 4-bit codes.
__device__ __forceinline__ uint32_t code_pair(uint32_t w, int j) { return ((w >> (4 * j)) & 0x000F000Fu) | 0x43004300u; }

__device__ __forceinline__ uint32_t bf16_pair(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Grid: one block per kWarps / KS groups of RT row tiles; a group's KS warps split the 64-column
// tiles. Three blocks fit a multiprocessor (at most 85 registers), whose 24 warps each keep two
// tiles' codes, scales and biases in flight.
// y (n, rows) f32.
template <class S, int RT, int KS>
__global__ void __launch_bounds__(kWarps * 32, 3) mma_matvec(const uint8_t* __restrict__ codes, int64_t row_bytes, const S* __restrict__ scales,
                                                     const S* __restrict__ biases, int64_t s_stride, int group_shift, int64_t rows,
                                                     int k_tiles, const float* __restrict__ x, int64_t x_stride, int n,
                                                     float* __restrict__ y, int64_t y_stride) {
  __shared__ float partial[kWarps][RT][4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, slice = warp % KS;
  const int64_t tile0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / KS) + warp / KS) * RT;
  int64_t row_g[RT];
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const int64_t tile = tile0 + r < rows / 16 ? tile0 + r : rows / 16 - 1;  // past the end: recompute the last tile, not written
    row_g[r] = tile * 16 + g;
  }
  const float* xg = x + (g < n ? g : 0) * x_stride + 16 * t;
  const uint32_t ones = 0x3F803F80u;  // bf16 (1, 1)

  float acc[RT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[r][i] = 0.0f;

  struct Codes {
    uint2 lo[RT], hi[RT];  // codes 16t..16t+15 of rows g and g + 8 of each row tile
    S scale_lo[RT], bias_lo[RT], scale_hi[RT], bias_hi[RT];  // their group's scale and bias
  };
  auto fetch = [&](Codes& c, int kt) {
    const int grp = (kt * 64) >> group_shift;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const uint8_t* p = codes + row_g[r] * row_bytes + kt * 32 + t * 8;
      c.lo[r] = __ldcs(reinterpret_cast<const uint2*>(p));
      c.hi[r] = __ldcs(reinterpret_cast<const uint2*>(p + 8 * row_bytes));
      c.scale_lo[r] = scales[row_g[r] * s_stride + grp];
      c.bias_lo[r] = biases[row_g[r] * s_stride + grp];
      c.scale_hi[r] = scales[(row_g[r] + 8) * s_stride + grp];
      c.bias_hi[r] = biases[(row_g[r] + 8) * s_stride + grp];
    }
  };
  auto process = [&](const Codes& cw, int kt) {
    // B fragments: step s holds x at columns 8(s/2) + 2(s%2) + {0, 4} and + {1, 5} of the lane's 16.
    uint32_t b[4][2];
    if (g < n) {
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
  // Two tiles in flight per warp: each tile's loads are issued two tiles before it is used.
  Codes even, odd;
  if (slice < k_tiles) fetch(even, slice);
  if (slice + KS < k_tiles) fetch(odd, slice + KS);
  for (int kt = slice; kt < k_tiles; kt += 2 * KS) {
    process(even, kt);
    if (kt + 2 * KS < k_tiles) fetch(even, kt + 2 * KS);
    if (kt + KS >= k_tiles) break;
    process(odd, kt + KS);
    if (kt + 3 * KS < k_tiles) fetch(odd, kt + 3 * KS);
  }

  if constexpr (KS > 1) {
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][r][i][lane] = acc[r][i];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int w = 1; w < KS; ++w) acc[r][i] += partial[warp + w][r][i][lane];
  }
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    if (tile0 + r >= rows / 16) break;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = 2 * t + (i & 1);
      const int64_t row = row_g[r] + (i >> 1) * 8;
      if (col < n) y[col * y_stride + row] = acc[r][i];
    }
  }
}

template <class S, int RT, int KS>
void launch(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  constexpr int64_t tiles_per_block = kWarps / KS * RT;
  const auto blocks = static_cast<unsigned>((w.rows / 16 + tiles_per_block - 1) / tiles_per_block);
  mma_matvec<S, RT, KS><<<blocks, kWarps * 32, 0, stream()>>>(static_cast<const uint8_t*>(w.data.raw()), w.data.stride(0) * 4, w.scales.data<S>(),
                                                          w.biases.data<S>(), w.scales.stride(0),
                                                          __builtin_ctz(static_cast<unsigned>(w.quant.group_size)), w.rows,
                                                          static_cast<int>(w.cols / 64), x, xs, n, y, ys);
}

// Warps per block splitting the columns: enough warps in all to keep every multiprocessor's loads
// in flight, while each warp keeps two or more column tiles.
template <class S, int RT>
void launch_split(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  const int64_t groups = (w.rows / 16 + RT - 1) / RT, k_tiles = w.cols / 64, target = int64_t{64} * multiprocessor_count();
  int ks = 1;
  while (ks < kWarps && groups * ks < target && k_tiles >= 4 * ks) ks *= 2;
  switch (ks) {
    case 1: return launch<S, RT, 1>(w, x, xs, n, y, ys);
    case 2: return launch<S, RT, 2>(w, x, xs, n, y, ys);
    case 4: return launch<S, RT, 4>(w, x, xs, n, y, ys);
    default: return launch<S, RT, 8>(w, x, xs, n, y, ys);
  }
}

template <class S>
void launch_rows(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  if (w.rows >= 8192) launch_split<S, 2>(w, x, xs, n, y, ys);
  else launch_split<S, 1>(w, x, xs, n, y, ys);
}

}  // namespace

bool mma_matvec_ok(const Weight& w, const Tensor& x, int64_t n) {
  return n >= 1 && n <= 8 && w.quantized() && w.quant.bits == 4 && (w.quant.group_size == 64 || w.quant.group_size == 128) &&
         (w.scales.dtype() == DType::bf16 || w.scales.dtype() == DType::f16) && w.rows % 16 == 0 && w.cols % 64 == 0 &&
         w.data.stride(0) * 8 == w.cols && aligned16(w.data.raw()) && aligned16(x.raw()) &&
         x.stride(0) % 4 == 0;
}

void mma_matvec(const Tensor& x, const Weight& w, Tensor& y) {
  const int n = static_cast<int>(x.dim(0));
  if (w.scales.dtype() == DType::bf16) launch_rows<__nv_bfloat16>(w, x.data<float>(), x.stride(0), n, y.data<float>(), y.stride(0));
  else launch_rows<__half>(w, x.data<float>(), x.stride(0), n, y.data<float>(), y.stride(0));
  check_launch("matmul (tensor-core mat-vec)");
}

}  // namespace sanctum::ops::cuda

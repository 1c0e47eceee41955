// y = x · wᵀ on the GPU.
//   Few rows (decode, speculative verify: n <= kMatvecRows): one warp per output row streams the
//   weight once with 16-byte loads, reading MLX 4/8-bit codes (or bf16) directly and accumulating
//   in f32 for up to 8 x rows at a time — the weight-bandwidth-bound path.
//   In the bf16 precision mode, 4-bit weights of the common layouts go to the tensor-core mat-vec
//   instead (matvec_mma.cu).
//   More rows (prefill): with MatmulPrecision::f32 the same mat-vec kernels, 8 rows per launch, so
//   results are bitwise independent of n; otherwise tensor cores with x rounded to bf16, accumulating
//   in f32: large tiled 4-bit weights and prompts of up to 2,048 tokens on Hopper through the GEMM
//   that dequantizes in registers (gemm_tiles.cu), anything else dequantized to a bf16 copy for
//   cuBLAS (dequantize.cu).
#include <algorithm>
#include <mutex>

#include "base/tuning.h"
#include "ops/cuda/blas.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/convert.cuh"
#include "ops/cuda/dequantize.cuh"
#include "ops/cuda/gemm_tiles.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/matvec_mma.cuh"
#include "ops/cuda/matvec_tiles.h"
#include "ops/precision.h"

namespace sanctum::ops::cuda {

namespace {

constexpr int kMatvecRows = 8;
constexpr int kWarpsPerBlock = 8;

// Streaming load: the weight is read once per step, so keep it out of L1 (x lives there).
__device__ __forceinline__ uint4 load_stream(const uint4* p) { return __ldcs(p); }

// The codes of one 32-bit word as exact floats, without integer-to-float conversions (a slow
// instruction class): each code is placed in the low mantissa of 2^23 with a byte permute, and 2^23
// is subtracted again.
template <int BITS>
__device__ __forceinline__ void decode_word(uint32_t w, float (&v)[32 / BITS]) {
  constexpr float kMagic = 8388608.0f;  // 2^23 = 0x4B000000
  if constexpr (BITS == 4) {
    const uint32_t lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;  // codes 0,2,4,6 and 1,3,5,7
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = __uint_as_float(__byte_perm(lo, 0x4B000000u, 0x7440u | k)) - kMagic;
      v[2 * k + 1] = __uint_as_float(__byte_perm(hi, 0x4B000000u, 0x7440u | k)) - kMagic;
    }
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | k)) - kMagic;
  }
}

__device__ __forceinline__ uint32_t word_of(const uint4& q, int i) { return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w; }

// Quantized mat-vec. KS warps of a block share R weight rows for NB x rows, each taking every KS-th
// run of 32 chunks of the row (a chunk is a uint4: VALS = 128 / BITS codes, within one group since
// groups are >= 32 values), so a matrix of few rows still has enough loads in flight to fill the GPU;
// a lane reuses the x values it loads for all R rows. w = scale * code + bias, so a chunk adds
// scale * sum(code * x) + bias * sum(x). The warps' partial sums meet in shared memory in a fixed
// order: a row's result depends on the weight's shape (which picks R and KS), never on NB.
template <int BITS, class S, int NB, int R, int KS>
__device__ __forceinline__ void quantized_matvec_body(const uint4* __restrict__ w, int64_t w_stride4, const S* __restrict__ scales,
                                                      const S* __restrict__ biases, int64_t s_stride, int group_shift, int64_t rows, int k,
                                                      const float* __restrict__ x, int64_t x_stride, int n, float* __restrict__ y,
                                                      int64_t y_stride) {
  constexpr int VALS = 128 / BITS, PER_WORD = 32 / BITS, GROUPS = kWarpsPerBlock / KS;
  static_assert(kWarpsPerBlock % KS == 0, "KS must divide the block's warps");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, slice = warp % KS;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * GROUPS + warp / KS) * R;
  if (KS == 1 && row0 >= rows) return;  // with KS > 1 every warp must reach the barrier below
  int64_t row[R];
#pragma unroll
  for (int r = 0; r < R; ++r) row[r] = row0 + r < rows ? row0 + r : rows - 1;  // past the end: recompute the last row, not written
  float acc[R][NB];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int b = 0; b < NB; ++b) acc[r][b] = 0.0f;
  const int chunks = k / VALS;
  // Software pipeline: the next chunk's codes, scales and biases are in flight while this one is
  // computed, so a lane never waits a full memory latency per chunk.
  uint4 q[R];
  float s[R], bias[R];
  auto fetch = [&](int c) {
    const int g = (c * VALS) >> group_shift;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      q[r] = load_stream(w + row[r] * w_stride4 + c);
      s[r] = to_f(scales[row[r] * s_stride + g]);
      bias[r] = to_f(biases[row[r] * s_stride + g]);
    }
  };
  const int first = slice * 32 + lane;
  if (row0 < rows && first < chunks) fetch(first);
  for (int c = row0 < rows ? first : chunks; c < chunks; c += 32 * KS) {
    uint4 cq[R];
    float cs[R], cb[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      cq[r] = q[r];
      cs[r] = s[r];
      cb[r] = bias[r];
    }
    if (c + 32 * KS < chunks) fetch(c + 32 * KS);
    const int col0 = c * VALS;
    float dot[R][NB], xs[NB];
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      xs[b] = 0.0f;
#pragma unroll
      for (int r = 0; r < R; ++r) dot[r][b] = 0.0f;
    }
#pragma unroll
    for (int wi = 0; wi < 4; ++wi) {
      float xv[NB][PER_WORD];
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        const float4* xp = reinterpret_cast<const float4*>(x + (b < n ? b : 0) * x_stride + col0 + wi * PER_WORD);
#pragma unroll
        for (int j = 0; j < PER_WORD / 4; ++j) {
          const float4 v = xp[j];
          xv[b][4 * j] = v.x;
          xv[b][4 * j + 1] = v.y;
          xv[b][4 * j + 2] = v.z;
          xv[b][4 * j + 3] = v.w;
          xs[b] += (v.x + v.y) + (v.z + v.w);
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float v[PER_WORD];
        decode_word<BITS>(word_of(cq[r], wi), v);
#pragma unroll
        for (int b = 0; b < NB; ++b)
#pragma unroll
          for (int j = 0; j < PER_WORD; ++j) dot[r][b] = fmaf(v[j], xv[b][j], dot[r][b]);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int b = 0; b < NB; ++b)
        acc[r][b] = fmaf(cs[r], dot[r][b], fmaf(cb[r], xs[b], acc[r][b]));  // explicit: no
                                                                            // contraction choices per NB
  }
  if constexpr (KS == 1) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        const float v = warp_sum(acc[r][b]);
        if (lane == 0 && b < n && row0 + r < rows) y[b * y_stride + row0 + r] = v;
      }
  } else {
    __shared__ float part[kWarpsPerBlock][R * NB];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        const float v = warp_sum(acc[r][b]);
        if (lane == 0) part[warp][r * NB + b] = v;
      }
    __syncthreads();
    if (slice == 0 && lane < R * NB) {
      const int r = lane / NB, b = lane % NB;
      float v = part[warp][lane];
#pragma unroll
      for (int k2 = 1; k2 < KS; ++k2) v += part[warp + k2][lane];
      if (b < n && row0 + r < rows) y[b * y_stride + row0 + r] = v;
    }
  }
}

template <int BITS, class S, int NB, int R, int KS>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    quantized_matvec(const uint4* __restrict__ w, int64_t w_stride4, const S* __restrict__ scales, const S* __restrict__ biases,
                     int64_t s_stride, int group_shift, int64_t rows, int k, const float* __restrict__ x, int64_t x_stride, int n,
                     float* __restrict__ y, int64_t y_stride) {
  quantized_matvec_body<BITS, S, NB, R, KS>(w, w_stride4, scales, biases, s_stride, group_shift, rows, k, x, x_stride, n, y, y_stride);
}

// The same for MoE experts chosen on the device: block row y = blockIdx.y is output row `slot`, whose
// expert ids[slot] is looked up in a table of (data, scales, biases) addresses; x row is slot / fan.
template <int BITS, class S, int R, int KS>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    expert_quantized_matvec(const int64_t* __restrict__ table, const int32_t* __restrict__ ids, int64_t w_stride4, int64_t s_stride,
                            int group_shift, int64_t rows, int k, const float* __restrict__ x, int64_t x_stride, int fan,
                            float* __restrict__ y, int64_t y_stride) {
  const int slot = blockIdx.y;
  const int64_t* e = table + 3 * ids[slot];
  quantized_matvec_body<BITS, S, 1, R, KS>(reinterpret_cast<const uint4*>(e[0]), w_stride4, reinterpret_cast<const S*>(e[1]),
                                           reinterpret_cast<const S*>(e[2]), s_stride, group_shift, rows, k, x + (slot / fan) * x_stride,
                                           x_stride, 1, y + static_cast<int64_t>(slot) * y_stride, y_stride);
}

// Any expert format (dense experts, odd layouts): warp per (output row, slot). `w` describes every
// expert but the addresses, which come from the table.
__global__ void expert_generic_matvec(const int64_t* __restrict__ table, const int32_t* __restrict__ ids, WeightView w, int64_t rows,
                                      int64_t k, const float* __restrict__ x, int64_t x_stride, int fan, float* __restrict__ y,
                                      int64_t y_stride) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int slot = blockIdx.y;
  if (row >= rows) return;
  const int64_t* e = table + 3 * ids[slot];
  if (w.codes != nullptr) {
    w.codes = reinterpret_cast<const uint32_t*>(e[0]);
    w.scales = reinterpret_cast<const void*>(e[1]);
    w.biases = reinterpret_cast<const void*>(e[2]);
  } else {
    w.dense = reinterpret_cast<const void*>(e[0]);
  }
  const float* xr = x + (slot / fan) * x_stride;
  float acc = 0.0f;
  for (int64_t c = lane; c < k; c += 32) acc = fmaf(weight_at(w, row, c), xr[c], acc);
  acc = warp_sum(acc);
  if (lane == 0) y[static_cast<int64_t>(slot) * y_stride + row] = acc;
}

// bf16 mat-vec: each uint4 holds 8 weights.
template <int NB>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    bf16_matvec(const uint4* __restrict__ w, int64_t w_stride4, int64_t rows, int64_t k, const float* __restrict__ x, int64_t x_stride,
                int n, float* __restrict__ y, int64_t y_stride) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= rows) return;
  const uint4* wr = w + row * w_stride4;
  float acc[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) acc[b] = 0.0f;
  for (int64_t c = lane; c < k / 8; c += 32) {
    const uint4 q = load_stream(wr + c);
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
    float wf[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      wf[2 * i] = __uint_as_float(words[i] << 16);
      wf[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      if (b < n) {
        const float4* xp = reinterpret_cast<const float4*>(x + b * x_stride + c * 8);
        const float4 x0 = xp[0], x1 = xp[1];
        const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[b] = fmaf(wf[j], xv[j], acc[b]);
      }
    }
  }
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    const float v = warp_sum(acc[b]);
    if (lane == 0 && b < n) y[b * y_stride + row] = v;
  }
}

// Any layout the fast kernels do not take (f32/f16 weights, odd alignment): one warp per (row, x row).
__global__ void generic_matvec(WeightView w, int64_t rows, int64_t k, const float* x, int64_t x_stride, float* y, int64_t y_stride) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int64_t b = blockIdx.y;
  if (row >= rows) return;
  float acc = 0.0f;
  for (int64_t c = lane; c < k; c += 32) acc = fmaf(weight_at(w, row, c), x[b * x_stride + c], acc);
  acc = warp_sum(acc);
  if (lane == 0) y[b * y_stride + row] = acc;
}

struct QuantizedArgs {
  const uint4* w;
  int64_t w4;
  const void* scales;
  const void* biases;
  int64_t ss;
  int shift;
  int64_t rows;
  int k;
};

template <int BITS, class S, int NB, int R, int KS>
void launch_quantized_block(const QuantizedArgs& a, const float* x, int64_t xs, int m, float* y, int64_t ys) {
  constexpr int64_t rows_per_block = kWarpsPerBlock / KS * R;
  const auto blocks = static_cast<unsigned>((a.rows + rows_per_block - 1) / rows_per_block);
  quantized_matvec<BITS, S, NB, R, KS><<<blocks, kWarpsPerBlock * 32, 0, stream()>>>(a.w, a.w4, static_cast<const S*>(a.scales),
                                                                                     static_cast<const S*>(a.biases), a.ss, a.shift, a.rows,
                                                                                     a.k, x, xs, m, y, ys);
}

template <int BITS, class S, int R, int KS>
void launch_quantized_rows(const QuantizedArgs& a, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  for (int done = 0; done < n; done += kMatvecRows) {
    const int m = std::min(kMatvecRows, n - done);
    const float* xb = x + done * xs;
    float* yb = y + done * ys;
    if (m == 1) launch_quantized_block<BITS, S, 1, R, KS>(a, xb, xs, m, yb, ys);
    else if (m == 2) launch_quantized_block<BITS, S, 2, R, KS>(a, xb, xs, m, yb, ys);
    else if (m <= 4) launch_quantized_block<BITS, S, 4, R, KS>(a, xb, xs, m, yb, ys);
    else launch_quantized_block<BITS, S, 8, 1, KS>(a, xb, xs, m, yb, ys);
  }
}

// Warps that split one row's chunks: enough warps overall to fill every multiprocessor (64 warps
// each), while each warp still gets two or more runs of 32 chunks.
int k_split(int64_t rows, int64_t cols, int bits, int rows_per_warp) {
  const int64_t chunks = cols / (128 / bits), target = int64_t{64} * multiprocessor_count();
  const int64_t warps = (rows + rows_per_warp - 1) / rows_per_warp;
  int ks = 1;
  while (ks < 4 && warps * ks < target && chunks >= int64_t{128} * ks) ks *= 2;
  return ks;
}

template <int BITS, class S, int R>
void launch_quantized_split(const QuantizedArgs& a, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  switch (k_split(a.rows, a.k, BITS, R)) {
    case 1: return launch_quantized_rows<BITS, S, R, 1>(a, x, xs, n, y, ys);
    case 2: return launch_quantized_rows<BITS, S, R, 2>(a, x, xs, n, y, ys);
    default: return launch_quantized_rows<BITS, S, R, 4>(a, x, xs, n, y, ys);
  }
}

// Rows per warp: several where there are rows enough to keep every multiprocessor busy (x loads are
// then shared), one for small weights.
template <int BITS, class S>
void launch_quantized(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  const QuantizedArgs a{reinterpret_cast<const uint4*>(w.data.raw()),
                        w.data.stride(0) / 4,
                        w.scales.raw(),
                        w.biases.raw(),
                        w.scales.stride(0),
                        __builtin_ctz(static_cast<unsigned>(w.quant.group_size)),
                        w.rows,
                        static_cast<int>(w.cols)};
  if (w.rows >= 16384) launch_quantized_split<BITS, S, 4>(a, x, xs, n, y, ys);
  else if (w.rows >= 4096) launch_quantized_split<BITS, S, 2>(a, x, xs, n, y, ys);
  else launch_quantized_split<BITS, S, 1>(a, x, xs, n, y, ys);
}

template <int BITS>
void launch_quantized_bits(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  switch (w.scales.dtype()) {
    case DType::bf16: return launch_quantized<BITS, __nv_bfloat16>(w, x, xs, n, y, ys);
    case DType::f16: return launch_quantized<BITS, __half>(w, x, xs, n, y, ys);
    default: return launch_quantized<BITS, float>(w, x, xs, n, y, ys);
  }
}

void launch_bf16(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  const unsigned blocks = blocks_for(w.rows, kWarpsPerBlock);
  const auto* wd = reinterpret_cast<const uint4*>(w.data.raw());
  const int64_t w4 = w.data.stride(0) / 8;
  for (int done = 0; done < n; done += kMatvecRows) {
    const int m = std::min(kMatvecRows, n - done);
    const float* xb = x + done * xs;
    float* yb = y + done * ys;
    if (m == 1) bf16_matvec<1><<<blocks, kWarpsPerBlock * 32, 0, stream()>>>(wd, w4, w.rows, w.cols, xb, xs, m, yb, ys);
    else if (m == 2) bf16_matvec<2><<<blocks, kWarpsPerBlock * 32, 0, stream()>>>(wd, w4, w.rows, w.cols, xb, xs, m, yb, ys);
    else if (m <= 4) bf16_matvec<4><<<blocks, kWarpsPerBlock * 32, 0, stream()>>>(wd, w4, w.rows, w.cols, xb, xs, m, yb, ys);
    else bf16_matvec<8><<<blocks, kWarpsPerBlock * 32, 0, stream()>>>(wd, w4, w.rows, w.cols, xb, xs, m, yb, ys);
  }
}

// MLX codes the fast quantized kernels read: 4 or 8 bits, whole uint4s per row, groups of 32-128.
// Tiled weights take the generic kernels (which read every layout) outside the tiled mat-vec.
bool quantized_fast_ok(const Weight& w) {
  return w.quantized() && w.layout == WeightLayout::rows && (w.quant.bits == 4 || w.quant.bits == 8) && w.data.stride(0) % 4 == 0 &&
         w.cols % 32 == 0 && w.cols < (int64_t{1} << 30) &&
         (w.quant.group_size == 32 || w.quant.group_size == 64 || w.quant.group_size == 128);
}

bool fast_matvec_ok(const Weight& w, const Tensor& x) {
  if (!aligned16(w.data.raw()) || !aligned16(x.raw()) || x.stride(0) % 4 != 0) return false;
  if (w.quantized()) return quantized_fast_ok(w);
  return w.data.dtype() == DType::bf16 && w.data.stride(0) % 8 == 0 && w.cols % 8 == 0;
}

void matvec(const Tensor& x, const Weight& w, Tensor& y) {
  const int n = static_cast<int>(x.dim(0));
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  if (fast_matvec_ok(w, x)) {
    if (!w.quantized()) launch_bf16(w, xp, x.stride(0), n, yp, y.stride(0));
    else if (w.quant.bits == 4) launch_quantized_bits<4>(w, xp, x.stride(0), n, yp, y.stride(0));
    else launch_quantized_bits<8>(w, xp, x.stride(0), n, yp, y.stride(0));
  } else {
    const dim3 grid(blocks_for(w.rows, kWarpsPerBlock), static_cast<unsigned>(n));
    generic_matvec<<<grid, kWarpsPerBlock * 32, 0, stream()>>>(weight_view(w), w.rows, w.cols, xp, x.stride(0), yp, y.stride(0));
  }
  check_launch("matmul");
}

// Scratch for dequantized weights and bf16 activations.
Tensor& weight_scratch() {
  static Tensor t;
  return t;
}
Tensor& x_scratch() {
  static Tensor t;
  return t;
}

}  // namespace

void copy_gemm(const Tensor& x, const Weight& w, Tensor& y) {
  const int64_t n = x.dim(0), m = w.rows, k = w.cols;
  const float one = 1.0f, zero = 0.0f;
  const __nv_bfloat16* wp;
  int64_t ld = k;
  if (!w.quantized() && w.data.dtype() == DType::bf16) {
    wp = static_cast<const __nv_bfloat16*>(w.data.raw());
    ld = w.data.stride(0);
  } else {
    auto* buf = static_cast<__nv_bfloat16*>(scratch_bytes(weight_scratch(), static_cast<size_t>(m * k) * 2));
    dequantize_to_bf16(w, buf);
    check_launch("matmul dequantize");
    wp = buf;
  }
  const __nv_bfloat16* xb;
  int64_t ldx = k;
  if (x.dtype() == DType::bf16) {  // rounded by its producer already
    xb = x.data<__nv_bfloat16>();
    ldx = x.stride(0);
  } else {
    auto* converted = static_cast<__nv_bfloat16*>(scratch_bytes(x_scratch(), static_cast<size_t>(n * k) * 2));
    rows_to_bf16(x.data<float>(), x.stride(0), n, k, converted);
    xb = converted;
  }
  const cudaDataType y_type = y.dtype() == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;  // f32 sums either way
  check_blas(blas_gemm_ex(blas_handle(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &one, wp,
                          CUDA_R_16BF, static_cast<int>(ld), xb, CUDA_R_16BF, static_cast<int>(ldx), &zero, y.raw(), y_type,
                          static_cast<int>(y.stride(0)), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "matmul");
}

namespace {

void gemm(const Tensor& x, const Weight& w, Tensor& y) {
  if (tiles_gemm_ok(w, x) && tiles_gemm_preferred(w, x.dim(0))) return tiles_gemm(x, w, y);
  copy_gemm(x, w, y);
}

}  // namespace

// A decode batch of up to kTiledRows rows over a tiled weight stays on the tiled mat-vec (one launch,
// each weight tile read once for all rows) rather than the prefill GEMM, whose tiles are sized for
// prompts: 16 streams of the 27B shape on an H100 spent 60% of the GPU's time in that GEMM and
// decoded slower than 8 streams (505.7 against 577.2 tok/s; bench/gpu/batched_decode.py --trace).
bool matmul_takes_bf16(const Weight& w, int64_t rows) {
  return matmul_precision() != MatmulPrecision::f32 && rows > kMatvecRows && !(w.layout == WeightLayout::tiles && rows <= kTiledRows);
}

bool matmul_gives_bf16(const Weight& w, int64_t rows) { return current_tuning().on(Knob::gemm_bf16_out) && matmul_takes_bf16(w, rows); }

void matmul(const Tensor& x, const Weight& w, Tensor& y) {
  // The front end admits bf16 x or y only where the GEMM runs.
  if (x.dtype() == DType::bf16 || y.dtype() == DType::bf16) return gemm(x, w, y);
  // Exact mode stays on the mat-vec kernels at every n (8 rows per launch): each row's sums then run
  // in one fixed order, so a row's result does not depend on how many rows a forward carries.
  const bool exact = matmul_precision() == MatmulPrecision::f32;
  if (!exact && tiles_matvec_ok(w, x, x.dim(0))) return tiles_matvec(x, w, y);
  if (!exact && mma_matvec_ok(w, x, x.dim(0))) return mma_matvec(x, w, y);
  if (x.dim(0) <= kMatvecRows || exact) matvec(x, w, y);
  else gemm(x, w, y);
}

namespace {
template <int BITS, class S>
void launch_expert_quantized(const ExpertSet& set, const int32_t* ids, const Tensor& x, int fan, Tensor& y) {
  const Weight& w = set[0];
  constexpr int R = 2, KS = 2;  // expert matrices are small: two warps per row pair
  constexpr int64_t rows_per_block = kWarpsPerBlock / KS * R;
  const dim3 grid(static_cast<unsigned>((w.rows + rows_per_block - 1) / rows_per_block), static_cast<unsigned>(y.dim(0)));
  expert_quantized_matvec<BITS, S, R, KS>
      <<<grid, kWarpsPerBlock * 32, 0, stream()>>>(set.device_table().data<int64_t>(), ids, w.data.stride(0) / 4, w.scales.stride(0),
                                                   __builtin_ctz(static_cast<unsigned>(w.quant.group_size)), w.rows,
                                                   static_cast<int>(w.cols), x.data<float>(), x.stride(0), fan, y.data<float>(),
                                                   y.stride(0));
}
template <int BITS>
void launch_expert_bits(const ExpertSet& set, const int32_t* ids, const Tensor& x, int fan, Tensor& y) {
  switch (set[0].scales.dtype()) {
    case DType::bf16: return launch_expert_quantized<BITS, __nv_bfloat16>(set, ids, x, fan, y);
    case DType::f16: return launch_expert_quantized<BITS, __half>(set, ids, x, fan, y);
    default: return launch_expert_quantized<BITS, float>(set, ids, x, fan, y);
  }
}
}  // namespace

void expert_matmul(const Tensor& x, const ExpertSet& experts, const Tensor& ids, Tensor& y) {
  const Weight& w = experts[0];
  const int fan = static_cast<int>(y.dim(0) / x.dim(0));
  const int32_t* id = ids.data<int32_t>();
  check(y.dim(0) <= 65535, ErrorKind::unsupported, "[expert_matmul] at most 65535 rows per call on cuda");
  if (matmul_precision() != MatmulPrecision::f32 && tiles_experts_ok(experts, x))
    return tiles_expert_matvec(x, experts, nullptr, ids, y, nullptr);
  bool fast = quantized_fast_ok(w) && aligned16(x.raw()) && x.stride(0) % 4 == 0;
  for (int64_t e = 0; fast && e < experts.size(); ++e) fast = aligned16(experts[e].data.raw());
  if (fast) {
    if (w.quant.bits == 4) launch_expert_bits<4>(experts, id, x, fan, y);
    else launch_expert_bits<8>(experts, id, x, fan, y);
  } else {
    const dim3 grid(blocks_for(w.rows, kWarpsPerBlock), static_cast<unsigned>(y.dim(0)));
    expert_generic_matvec<<<grid, kWarpsPerBlock * 32, 0, stream()>>>(experts.device_table().data<int64_t>(), id, weight_view(w), w.rows,
                                                                      w.cols, x.data<float>(), x.stride(0), fan, y.data<float>(),
                                                                      y.stride(0));
  }
  check_launch("expert_matmul");
}

}  // namespace sanctum::ops::cuda

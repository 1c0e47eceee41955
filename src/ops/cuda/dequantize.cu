// MLX weights (row or tiled layout) dequantized into a dense (rows, cols) bf16 buffer for cuBLAS,
// the prompt path wherever the fused GEMM does not run (longer forwards, smaller weights, other GPUs).
// Every value is weight_at's (scale * code + bias in one f32 fma), rounded to bf16.
//
// One thread per 32-bit code word, whose 32 / BITS values share a group and land side by side, so
// that a warp's stores are whole 128-byte lines: on an H200 this reads and writes 3.4-3.5 TB/s of the
// 4.2 a plain copy of the same bytes moves (cuda_perf_test dequantize). Threads that took 16 bytes of
// codes each (32 values, stores 32 or 64 bytes apart across a warp) ran at 2.1-2.8 TB/s, and four
// words a thread at 2.0-3.0.
#include <cuda_bf16.h>

#include "ops/cuda/common.cuh"
#include "ops/cuda/dequantize.cuh"

namespace sanctum::ops::cuda {

namespace {

// Code j of a word as an exact float without an integer conversion: the code in the low mantissa
// bits of 2^23, minus 2^23.
template <int BITS>
__device__ __forceinline__ float code_value(uint32_t word, int j) {
  return __uint_as_float(((word >> (j * BITS)) & ((1u << BITS) - 1u)) | 0x4B000000u) - 8388608.0f;
}

template <int BITS, bool TILES>
__global__ void dequantize_words(WeightView w, uint32_t rows, uint32_t words_per_row, int64_t cols, __nv_bfloat16* out) {
  constexpr int kPer = 32 / BITS;
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * words_per_row) return;
  uint32_t row, word, code;
  int64_t s;
  if constexpr (TILES) {  // word i of the tiled codes: ((rt k_tiles + kt) 32 + lane) 4 + 2 h + e (matvec_tiles.cuh)
    const uint32_t e = i & 3, lane = (i >> 2) & 31, tile = i >> 7, k_tiles = words_per_row / 8;
    const uint32_t rt = tile / k_tiles, kt = tile - rt * k_tiles, g = lane >> 2, h = e >> 1;
    row = rt * 16 + g + 8 * h;
    word = kt * 8 + (lane & 3) * 2 + (e & 1);
    code = w.codes[i];
    s = (static_cast<int64_t>(rt) * w.scale_stride + word * kPer / w.group) * 16 + g * 2 + h;
  } else {
    row = i / words_per_row;
    word = i - row * words_per_row;
    code = w.codes[static_cast<int64_t>(row) * w.stride + word];
    s = static_cast<int64_t>(row) * w.scale_stride + word * kPer / w.group;
  }
  const float scale = load_float(w.scales, w.scale_kind, s), bias = load_float(w.biases, w.scale_kind, s);
  __align__(16) uint32_t v[kPer / 2];  // bf16 pairs
#pragma unroll
  for (int j = 0; j < kPer; j += 2) {
    const __nv_bfloat162 pair =
        __floats2bfloat162_rn(fmaf(scale, code_value<BITS>(code, j), bias), fmaf(scale, code_value<BITS>(code, j + 1), bias));
    v[j / 2] = *reinterpret_cast<const uint32_t*>(&pair);
  }
  __nv_bfloat16* dst = out + static_cast<int64_t>(row) * cols + static_cast<int64_t>(word) * kPer;
  if constexpr (kPer == 8) *reinterpret_cast<uint4*>(dst) = make_uint4(v[0], v[1], v[2], v[3]);
  else *reinterpret_cast<uint2*>(dst) = make_uint2(v[0], v[1]);
}

// Any other weight (other code widths, dense weights), one element per thread.
__global__ void dequantize_elements(WeightView w, int64_t rows, int64_t cols, __nv_bfloat16* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= rows * cols) return;
  out[i] = __float2bfloat16(weight_at(w, i / cols, i % cols));
}

}  // namespace

void dequantize_to_bf16(const Weight& w, __nv_bfloat16* out) {
  const WeightView view = weight_view(w);
  const int64_t words_per_row = w.quantized() ? w.cols * w.quant.bits / 32 : 0, words = w.rows * words_per_row;
  const bool by_word = w.quantized() && (w.quant.bits == 4 || (w.quant.bits == 8 && w.layout == WeightLayout::rows)) &&
                       words < (int64_t{1} << 32) && aligned16(out);
  if (!by_word) {
    dequantize_elements<<<blocks_for(w.rows * w.cols, 256), 256, 0, stream()>>>(view, w.rows, w.cols, out);
    return;
  }
  const auto r = static_cast<uint32_t>(w.rows), wpr = static_cast<uint32_t>(words_per_row);
  const unsigned blocks = blocks_for(words, 256);
  if (w.layout == WeightLayout::tiles) dequantize_words<4, true><<<blocks, 256, 0, stream()>>>(view, r, wpr, w.cols, out);
  else if (w.quant.bits == 4) dequantize_words<4, false><<<blocks, 256, 0, stream()>>>(view, r, wpr, w.cols, out);
  else dequantize_words<8, false><<<blocks, 256, 0, stream()>>>(view, r, wpr, w.cols, out);
}

}  // namespace sanctum::ops::cuda

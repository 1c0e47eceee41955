#pragma once
// What the kernels on either side of the split RMSNorm (ops/normed_matmul.h) share: the producers
// (the residual mat-vec, matvec_tiles.cuh; the MoE combine, moe.cu) take one view of the stream and
// one check of it, and the readers (the scaled mat-vec; apply_norm_scale, norms.cu) one computation
// of the scale, so that they agree to the bit.
#include "ops/cuda/common.cuh"
#include "ops/normed_matmul.h"

namespace sanctum::ops::cuda {

// Readers stage the squares in 16-byte copies: a buffer of them holds whole groups of four.
constexpr int64_t squares_room(int64_t count) { return (count + 3) / 4 * 4; }

// A (1, d) f32 row, contiguous on the GPU (the stream h, and u).
inline bool stream_row(const Tensor* t, int64_t d) {
  return t != nullptr && *t && t->device() == Device::cuda && t->dtype() == DType::f32 && t->ndim() == 2 && t->dim(0) == 1 &&
         t->dim(1) == d && t->is_contiguous();
}

// Whether r fits a producer of d outputs that leaves `count` squares.
inline bool residual_fits(const ResidualNorm& r, int64_t d, int64_t count) {
  const Tensor *w = r.weight, *sq = r.squares;
  return stream_row(r.h, d) && stream_row(r.u, d) && w != nullptr && *w && w->device() == Device::cuda && w->ndim() == 1 &&
         w->dim(0) == d && w->is_contiguous() && (w->dtype() == DType::f32 || w->dtype() == DType::bf16 || w->dtype() == DType::f16) &&
         sq != nullptr && *sq && sq->device() == Device::cuda && sq->dtype() == DType::f32 && sq->is_contiguous() &&
         sq->numel() >= squares_room(count);
}

// A producer's view of a ResidualNorm: h += y, u = h * (weight + offset), squares[block] = the
// block's sum of h^2.
struct ResidualOut {
  float* h = nullptr;
  const void* weight = nullptr;
  FloatKind kind = FloatKind::f32;
  float offset = 0.0f;
  float* u = nullptr;
  float* squares = nullptr;
};

inline ResidualOut residual_out(const ResidualNorm& r) {
  return ResidualOut{r.h->data<float>(), r.weight->raw(), float_kind(*r.weight), r.offset, r.u->data<float>(), r.squares->data<float>()};
}

// Row j of the stream with y added to its value h (as read), and u from the norm weight w there;
// returns the new value, whose square the producer sums.
__device__ __forceinline__ float add_to_stream(const ResidualOut& r, int64_t j, float h, float y, float w) {
  const float v = h + y;
  r.h[j] = v;
  r.u[j] = v * (w + r.offset);
  return v;
}

// rsqrt(mean square + eps) from `count` partial sums of squares over `cols` values, by one warp (every
// lane gets it): lane-strided sums in a fixed order, then warp_sum, so every reader gets the same bits.
__device__ __forceinline__ float norm_scale(const float* squares, int count, float cols, float eps) {
  float s = 0.0f;
  for (int i = threadIdx.x & 31; i < count; i += 32) s += squares[i];
  s = warp_sum(s);
  return rsqrtf(s / cols + eps);
}

}  // namespace sanctum::ops::cuda

#pragma once
// The RMSNorm between two sub-blocks, split across the projections around it where the device has
// kernels for it (one row on a GPU, tiled 4-bit weights): the projection that ends a sub-block adds
// its output to the residual stream and prepares the next norm (matmul_residual), and the projection
// that begins the next sub-block finishes it (matmul_scaled). No add + RMSNorm launch stands between
// them; on an H200 each was 2.5-3.5 us of a decode step.
#include <cstdint>

#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops {

// What the projection ending a sub-block writes besides the stream: h (1, d) f32 += y in place;
// u (1, d) f32 = h * (weight + offset) with the next norm's weight (d); squares (at least d / 16 f32,
// rounded up to a multiple of 4): per block of the launch, the sum of the squares of its h values.
struct ResidualNorm {
  Tensor* h = nullptr;
  const Tensor* weight = nullptr;
  float offset = 0.0f;
  Tensor* u = nullptr;
  Tensor* squares = nullptr;
};

// The next sub-block's input as matmul_residual leaves it: rms_norm(h) = u * rsqrt(sum of
// squares[0, count) / d + eps).
struct ScaledInput {
  const Tensor* u = nullptr;
  const Tensor* squares = nullptr;
  int64_t count = 0;
  float eps = 0.0f;
};

// h += x · wᵀ with the next norm prepared (ResidualNorm), where matmul_residual_ok (a GPU, x one row,
// a tiled weight; the model offers it unless its tuning has fuse_norm=0). Returns the count of squares written.
bool matmul_residual_ok(const Tensor& x, const Weight& w, const ResidualNorm& r);
int64_t matmul_residual(const Tensor& x, const Weight& w, const ResidualNorm& r);

// y (1, w.rows) = rms_norm(h) · wᵀ from a ScaledInput, where matmul_scaled_ok (a tiled weight). The
// sums are of bf16(u) and scaled once, where matmul of the normed x sums bf16(x): another rounding of
// the same size.
bool matmul_scaled_ok(const ScaledInput& in, const Weight& w);
void matmul_scaled(const ScaledInput& in, const Weight& w, Tensor& y);
// matmul_silu_mul of a ScaledInput, likewise.
bool matmul_silu_mul_scaled_ok(const ScaledInput& in, const Weight& gate_up);
void matmul_silu_mul_scaled(const ScaledInput& in, const Weight& gate_up, Tensor& act);

// x (1, d) f32 = rms_norm(h) from a ScaledInput, for a reader that cannot take it scaled (on the GPU).
void apply_norm_scale(const ScaledInput& in, Tensor& x);

}  // namespace sanctum::ops

#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops {

// out[r] = (x[r] - mean(x[r])) / sqrt(var(x[r]) + eps) * weight + bias, per row of the last dim
// (LayerNorm with a biased variance, as torch and mlx compute it). x, out: (..., d) f32, out may
// alias x; weight, bias: (d) f32/bf16/f16. On the CPU or the GPU (weight and bias contiguous there).
void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out);

}  // namespace sanctum::ops

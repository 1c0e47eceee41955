#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * (weight + weight_offset), per row of the last dim.
// x, out: (..., d) f32 (out may alias x); weight: (d) f32/bf16/f16. weight_offset is 0 for the
// usual convention and 1 for checkpoints that store (w - 1) (Qwen3.5 / Gemma style).
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, float weight_offset = 0.0f);

}  // namespace sanctum::ops

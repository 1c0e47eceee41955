#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * (weight + weight_offset), per row of the last dim.
// x, out: (..., d) f32 (out may alias x); weight: (d) f32/bf16/f16. weight_offset is 0 for the
// usual convention and 1 for checkpoints that store (w - 1) (Qwen3.5 / Gemma style). On a GPU out may
// be bf16 (each f32 result rounded once): the input of matmuls that take it so (matmul_input_dtype).
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, float weight_offset = 0.0f);
// The residual step between sub-blocks in one pass: h += delta, then out = rms_norm(h). Bitwise the
// same as add followed by rms_norm; one kernel instead of two on a GPU. h, delta, out: (n, d) f32
// (on a GPU out may be bf16, as for rms_norm, and delta bf16: a prompt GEMM's output, matmul_output_dtype).
void add_rms_norm(Tensor& h, const Tensor& delta, const Tensor& weight, float eps, Tensor& out, float weight_offset = 0.0f);

}  // namespace sanctum::ops

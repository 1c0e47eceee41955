#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops {

// The two GELU forms checkpoints name: erf (exact, torch nn.GELU(), "gelu") and tanh
// (approximate, "gelu_pytorch_tanh").
enum class GeluKind { erf, tanh };

// out = gelu(x), elementwise f32, out may alias x; x and out of one shape with contiguous rows.
// On the CPU or the GPU.
void gelu(const Tensor& x, Tensor& out, GeluKind kind);

}  // namespace sanctum::ops

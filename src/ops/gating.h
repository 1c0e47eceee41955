#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops {

// out = x * sigmoid(gate), elementwise f32 of equal shape (rows may be strided); out may alias x.
// Qwen3.5 full attention multiplies its output by the sigmoid of a gate from q_proj.
void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out);

}  // namespace sanctum::ops

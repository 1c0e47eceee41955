#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops {

// out = silu(gate) * up, elementwise, f32. out may alias gate or up.
void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);

}  // namespace sanctum::ops

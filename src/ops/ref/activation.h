#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);

}  // namespace sanctum::ops::ref

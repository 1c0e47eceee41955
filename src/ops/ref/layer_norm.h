#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out);

}  // namespace sanctum::ops::ref

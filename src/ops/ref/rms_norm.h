#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, float weight_offset = 0.0f);

}  // namespace sanctum::ops::ref

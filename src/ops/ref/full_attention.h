#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

void full_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out);

}  // namespace sanctum::ops::ref

#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace sanctum::ops::ref {

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, float scale, Tensor& out);

}  // namespace sanctum::ops::ref

#pragma once
// Scalar reference: the truth in tests. Arguments are assumed checked by ops::matmul.
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops::ref {

void matmul(const Tensor& x, const Weight& w, Tensor& y);
// Weight element (r, c) as float: dense value or scale * q + bias.
float weight_at(const Weight& w, int64_t r, int64_t c);
// The same with scale * q + bias as one fused multiply-add, as the GPU's dequantization computes it.
float weight_at_fma(const Weight& w, int64_t r, int64_t c);

}  // namespace sanctum::ops::ref

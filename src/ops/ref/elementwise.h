#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

void add(const Tensor& a, const Tensor& b, Tensor& out);
void add_bias(Tensor& y, const Tensor& bias);
void copy(const Tensor& src, Tensor& dst);

}  // namespace sanctum::ops::ref

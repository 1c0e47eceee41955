#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops {

// out = a + b, elementwise f32 of equal shape; out may alias a or b.
void add(const Tensor& a, const Tensor& b, Tensor& out);
// y[r] += bias for every row r of y (n, m) f32; bias: (m) f32/bf16/f16.
void add_bias(Tensor& y, const Tensor& bias);
// Copies src into dst (same shape, both f32 or same dtype; strided allowed).
void copy(const Tensor& src, Tensor& dst);

}  // namespace sanctum::ops

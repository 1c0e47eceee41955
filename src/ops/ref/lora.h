#pragma once
#include "ops/lora.h"
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

// ops::lora_add, one element at a time in double precision.
void lora_add(const Tensor& x, const Tensor& a, const Tensor& b, float scale, Tensor& y);

}  // namespace sanctum::ops::ref

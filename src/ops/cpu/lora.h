#pragma once
// CPU entry point of ops::lora_add; arguments are already checked by src/ops/lora.cc.
#include "tensor/tensor.h"

namespace sanctum::ops::cpu {

void lora_add(const Tensor& x, const Tensor& a, const Tensor& b, float scale, Tensor& y);

}  // namespace sanctum::ops::cpu

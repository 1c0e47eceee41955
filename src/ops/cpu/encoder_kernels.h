#pragma once
// CPU entry points of the encoder ops (layer_norm, gelu, full_attention); arguments are already
// checked by the front ends in src/ops/*.cc.
#include "ops/gelu.h"
#include "tensor/tensor.h"

namespace sanctum::ops::cpu {

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out);
void gelu(const Tensor& x, Tensor& out, GeluKind kind);
void full_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out);

}  // namespace sanctum::ops::cpu

#pragma once
#include "ops/gelu.h"
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

void gelu(const Tensor& x, Tensor& out, GeluKind kind);

}  // namespace sanctum::ops::ref

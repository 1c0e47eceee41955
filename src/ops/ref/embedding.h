#pragma once
#include <cstdint>
#include <span>

#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops::ref {

void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out);

}  // namespace sanctum::ops::ref

#pragma once
#include <cstdint>
#include <span>

#include "ops/rope.h"
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

void rope(Tensor& x, std::span<const int32_t> positions, const RopeTable& table);

}  // namespace sanctum::ops::ref

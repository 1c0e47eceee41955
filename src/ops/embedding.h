#pragma once
#include <cstdint>
#include <span>

#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops {

// out[i] = table[ids[i]].  table: (vocab, dim) dense or quantized; out: (n, dim) f32.
// Ids outside [0, vocab) throw Error(invalid_argument).
void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out);

}  // namespace sanctum::ops

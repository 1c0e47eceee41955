#pragma once
#include <cstdint>
#include <span>

#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops {

// out[i] = table[ids[i]].  table: (vocab, dim) dense or quantized; out: (n, dim) f32.
// Ids outside [0, vocab) throw Error(invalid_argument).
void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out);
// The same with the ids in an i32 (n) tensor on the table's device (a recorded decode step reads its
// token there). The host cannot see GPU-resident ids: the caller checks them before writing them;
// the CUDA kernel writes a zero row for an id outside the table rather than reading past it.
void embedding(const Weight& table, const Tensor& ids, Tensor& out);

}  // namespace sanctum::ops

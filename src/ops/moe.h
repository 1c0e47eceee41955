#pragma once
// Row movement and mixing for mixture-of-experts layers, so the MoE block runs unchanged on any
// device: the routing decision is made on the host, these ops move the rows it names.
#include <cstdint>
#include <span>

#include "tensor/tensor.h"

namespace sanctum::ops {

// dst row dst_rows[i] = src row src_rows[i], for every i. src, dst: (rows, d) f32 with equal d; rows
// may be strided. Indices are checked against both tensors; dst rows must be distinct.
void copy_rows(const Tensor& src, std::span<const int32_t> src_rows, Tensor& dst, std::span<const int32_t> dst_rows);

// out[t] = sum over r < k of weights[t*k + r] * per_rank[t*k + r], then + shared_weights[t] * shared[t]
// when shared is given — in that order, so a token's result does not depend on the batch.
//   per_rank: (n*k, d) f32; weights: n*k; shared: (n, d) f32 or null; shared_weights: n (or empty);
//   out: (n, d) f32.
void moe_combine(const Tensor& per_rank, std::span<const float> weights, const Tensor* shared, std::span<const float> shared_weights,
                 Tensor& out);

}  // namespace sanctum::ops

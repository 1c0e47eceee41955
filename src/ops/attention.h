#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace sanctum::ops {

// Causal scaled-dot-product attention with grouped-query heads, read in place from a KV cache.
//   q:   (n, n_heads, head_dim) f32 — query i sits at absolute position q_pos0 + i
//   k,v: (n_kv, n_kv_heads, head_dim) f32 — cache rows 0..n_kv-1 (the token stride may exceed
//        n_kv_heads*head_dim); n_kv >= q_pos0 + n
//   out: (n, n_heads, head_dim) f32
// Query head h reads kv head h / (n_heads / n_kv_heads); K/V are never copied or broadcast.
// Query i attends to keys 0..q_pos0+i. Softmax in f32 with max subtraction.
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, float scale, Tensor& out);

}  // namespace sanctum::ops

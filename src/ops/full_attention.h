#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops {

// Bidirectional scaled-dot-product attention: every query attends to every key (an encoder's
// attention within one image; the causal, cache-reading form is ops::attention).
//   q:   (n, n_heads, head_dim) f32
//   k,v: (m, n_kv_heads, head_dim) f32, n_heads a multiple of n_kv_heads
//   out: (n, n_heads, head_dim) f32
// Softmax in f32 with max subtraction. On the GPU the two products run on cuBLAS (f32 in the f32
// precision mode, TF32 inputs otherwise).
void full_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out);

}  // namespace sanctum::ops

#pragma once
#include <cstdint>

#include "ops/positions.h"
#include "tensor/tensor.h"

namespace sanctum::ops {

// Causal scaled-dot-product attention with grouped-query heads, read in place from a KV cache.
//   q:   (n, n_heads, head_dim) f32 — query i sits at absolute position q_pos0 + i
//   k,v: (n_kv, n_kv_heads, head_dim) f32 — cache rows 0..n_kv-1 (the token stride may exceed
//        n_kv_heads*head_dim); n_kv >= q_pos0 + n
//   out: (n, n_heads, head_dim) f32 (on a GPU also bf16, contiguous: attention_output_dtype)
// Query head h reads kv head h / (n_heads / n_kv_heads); K/V are never copied or broadcast.
// Query i attends to keys 0..q_pos0+i. Softmax in f32 with max subtraction.
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, float scale, Tensor& out);
// The same over a whole cache: k and v hold its capacity rows, valid up to the queries' last
// position. Queries sit at `positions`; with positions.device set the first of them is read on the
// device, so a recorded decode step stays valid as the sequence grows.
void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Positions& positions, float scale, Tensor& out);

// Gated attention's output: the attention above, then out = out * sigmoid(gate) as sigmoid_mul
// computes it (gate: (n, n_heads, head_dim) f32 of one row stride; out f32). On a GPU in decode the
// gate is applied where the attention writes its result, with no launch of its own.
void gated_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Positions& positions, float scale, const Tensor& gate,
                     Tensor& out);

// The element type attention over `queries` queries of head_dim on `device` may also write out in:
// bf16 where the GPU's tensor-core prefill kernel computes it (the fast mode, long prompts, head dim
// 128 on Hopper), which then rounds each f32 result once on its way out, else f32. For an output
// projection that rounds its input to bf16 anyway (matmul_input_dtype): half the bytes and no
// conversion pass. Elsewhere bf16 out is the f32 result rounded. Tuning attention_bf16_out=0: f32 only.
DType attention_output_dtype(int64_t queries, int64_t head_dim, Device device);

}  // namespace sanctum::ops

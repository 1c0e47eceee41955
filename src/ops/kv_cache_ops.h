#pragma once
// The ops that write and read a KV cache in any stored format (ops/kv_format.h). With f32 keys and
// values each is exactly its f32 form (store_rows, rope_and_store, norm_rope_and_store, attention,
// gated_attention), on either device. Every format runs on both devices (on a GPU a bf16 cache is
// stored by the f32 ops' kernels, which round); a GPU store writes the bytes the CPU's store writes.
#include "ops/kv_format.h"
#include "ops/positions.h"
#include "ops/rope.h"
#include "tensor/tensor.h"

namespace sanctum::ops {

// dst rows [p, p + n) = src rows converted to dst's format, p = positions.first(): a forward's new
// K or V rows going into the cache. src (n, kv_heads * head_dim) f32 with contiguous rows.
void store_kv_rows(const Tensor& src, const KvRows& dst, const Positions& positions);

// rope_and_store and norm_rope_and_store (ops/rope_store.h) into a cache of any format.
void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, const KvRows& cache_k,
                    const KvRows& cache_v);
void norm_rope_and_store(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                         Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, const KvRows& cache_k,
                         const KvRows& cache_v);

// attention and gated_attention over a whole cache (ops/attention.h) of any format: k and v hold
// its capacity rows, valid up to the queries' last position.
void attention(const Tensor& q, const KvRows& k, const KvRows& v, const Positions& positions, float scale, Tensor& out);
void gated_attention(const Tensor& q, const KvRows& k, const KvRows& v, const Positions& positions, float scale, const Tensor& gate,
                     Tensor& out);

}  // namespace sanctum::ops

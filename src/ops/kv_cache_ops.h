#pragma once
// The ops that write and read a KV cache in any stored format (ops/kv_format.h). With f32 keys and
// values each is exactly its f32 form (store_rows, rope_and_store, norm_rope_and_store, attention,
// gated_attention), on either device. Every format runs on both devices (on a GPU a bf16 cache is
// stored by the f32 ops' kernels, which round); a GPU store writes the bytes the CPU's store writes.
#include <span>

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

// One sequence of a batched attention layer: rows [begin, end) of the batch's q, k, v, gate and out,
// at `positions` (the sequence's own; on a GPU a one-sequence batch may carry device positions), and
// its cache sides (capacity rows, any format).
struct SequenceCache {
  int64_t begin = 0, end = 0;
  Positions positions;
  KvRows k, v;
};

// The ops above for every sequence of a batch, each over its own cache, with each sequence's results
// bit for bit those of the one-sequence op over its rows. q (n, n_heads, head_dim), k (n, kv_heads,
// head_dim), v (n, kv_heads * head_dim), gate and out as the one-sequence ops take them, n the
// batch's rows; `positions` (n) of every row, for the rotations. On the CPU each rotation is one call
// over all the rows and attention is one parallel region over every sequence's (query, kv group)
// tasks; on a GPU the rotations and stores of sequences whose caches take them in one launch (f32 or
// bf16 rows) go out together (ops/rope_store.h), others' per sequence, and attention of two or more sequences
// at host positions goes out in one launch per launch shape (cuda::attention_kv_batch: one for a
// decode step), each sequence's bits those of its own call (a one-sequence batch as before: device
// positions and recorded steps alike).
void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, std::span<const int32_t> positions, const RopeTable& table,
                    std::span<const SequenceCache> seqs);
void norm_rope_and_store(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                         Tensor& k, const Tensor& v, std::span<const int32_t> positions, const RopeTable& table,
                         std::span<const SequenceCache> seqs);
void attention(const Tensor& q, std::span<const SequenceCache> seqs, float scale, Tensor& out);
void gated_attention(const Tensor& q, std::span<const SequenceCache> seqs, float scale, const Tensor& gate, Tensor& out);

}  // namespace sanctum::ops

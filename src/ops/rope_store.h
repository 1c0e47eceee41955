#pragma once
// An attention layer's step between its projections and attention: RoPE on the new queries and keys,
// then the rotated keys and the values into the KV cache at the tokens' positions. On a GPU this is
// one launch where rope, rope, store_rows, store_rows were four (a decode step's attention layer
// spent ~10 us on them); the results are those of the four ops.
#include <span>

#include "ops/positions.h"
#include "ops/rope.h"
#include "tensor/tensor.h"

namespace sanctum::ops {

// q (n, H, D) and k (n, KV, D) rotated in place as rope() does, each token's k heads contiguous
// (k viewable as (n, KV * D)); v (n, KV * D). The rows of k and v go to rows positions[i] of
// cache_k and cache_v (capacity, KV * D), as store_rows() puts them (f32, or bf16 on a GPU).
void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, Tensor& cache_k,
                    Tensor& cache_v);

// Gated attention's form (qwen3_5): first each head's row normalised, q_in's rows (n * H of them,
// head_dim each, strided as the projection left them) into q and k's in place, as rms_norm with
// q_norm and k_norm does, then rope_and_store. On a GPU one launch where three were, with the bits
// of the three ops.
void norm_rope_and_store(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                         Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, Tensor& cache_k, Tensor& cache_v);

// One sequence of a batch for the two ops below: its rows [begin, end) of the batch's q, k, v (and
// q_in's rows of those tokens), their positions, and its cache sides, as the one-sequence ops take them.
struct RopeStoreRows {
  int64_t begin = 0, end = 0;
  Positions positions;
  Tensor cache_k, cache_v;
};

// The ops above for every sequence of a batch, each token's results those of its sequence's own call.
// On a GPU two or more sequences with consecutive rows and caches of one dtype go out in one launch
// per 64 sequences (for norm_rope_and_store, where each sequence's own call would be its one fused
// launch), where each sequence had launches of its own; otherwise the sequences run one by one.
void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, const RopeTable& table, std::span<const RopeStoreRows> seqs);
void norm_rope_and_store(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                         Tensor& k, const Tensor& v, const RopeTable& table, std::span<const RopeStoreRows> seqs);

}  // namespace sanctum::ops

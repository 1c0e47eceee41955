#pragma once
// Entry points of the CUDA backend (src/ops/cuda/*.cu). Same signatures as the ops; arguments are
// already checked by the front ends in src/ops/*.cc, and every tensor is on the GPU. Work is queued
// on the process's stream (tensor/cuda/stream.h) and nothing here waits for it, except where a
// result must reach the host.
#include <cstdint>
#include <span>

#include "ops/gated_delta.h"
#include "ops/gelu.h"
#include "ops/kv_format.h"
#include "ops/moe.h"
#include "ops/normed_matmul.h"
#include "ops/rope.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops::cuda {

void matmul(const Tensor& x, const Weight& w, Tensor& y);
// Whether matmul of `rows` x rows takes bf16 x as it stands (the tensor-core GEMM path).
bool matmul_takes_bf16(const Weight& w, int64_t rows);
// Whether matmul of `rows` x rows may write bf16 y (the tensor-core GEMM path; tuning gemm_bf16_out).
bool matmul_gives_bf16(const Weight& w, int64_t rows);
// Device-side arguments (device_ids, device_positions, device_q_pos0, device_row0), where given,
// replace the host values they mirror in the kernels, for recorded decode steps (ops/positions.h).
void embedding(const Weight& table, std::span<const int32_t> ids, const int32_t* device_ids, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, float weight_offset);
void add_rms_norm(Tensor& h, const Tensor& delta, const Tensor& weight, float eps, Tensor& out, float weight_offset);
void apply_norm_scale(const ScaledInput& in, Tensor& x);
bool moe_combine_residual_ok(int64_t d, const ResidualNorm& r);
int64_t moe_combine_shared_rank_residual(const Tensor& per_rank, const Tensor& weights, const Tensor& shared_logit, const ResidualNorm& r);
void rope(Tensor& x, std::span<const int32_t> positions, const int32_t* device_positions, const RopeTable& table);
void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, std::span<const int32_t> positions, const int32_t* device_positions,
                    const RopeTable& table, Tensor& cache_k, Tensor& cache_v);
// Whether rms_norm of x's rows (2-D, f32) into out runs in one-warp blocks of the chunked kernel,
// whose bits norm_rope_and_store's fused launch gives.
bool rms_norm_rows_in_one_warp(const Tensor& x, const Tensor& out);
// ops::norm_rope_and_store in one launch, where norm_rope_and_store_fused says it gives the bits of
// the three ops (tuning fuse_head_norm_rope=0: never, for comparisons).
bool norm_rope_and_store_fused(const Tensor& q_in, const Tensor& q, const Tensor& k);
void norm_rope_and_store(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                         Tensor& k, const Tensor& v, std::span<const int32_t> positions, const int32_t* device_positions,
                         const RopeTable& table, Tensor& cache_k, Tensor& cache_v);
// One sequence of a batch's rotations and stores: rows [begin, end) of q, k and v (consecutive
// sequences hold consecutive rows), their positions (host; device_positions where the step reads
// them there), and the sequence's cache sides (capacity rows of f32 or bf16, every sequence's alike).
struct RopeStoreSequence {
  int64_t begin = 0, end = 0;
  std::span<const int32_t> positions;
  const int32_t* device_positions = nullptr;
  Tensor cache_k, cache_v;
};
// rope_and_store and norm_rope_and_store (where norm_rope_and_store_fused) of every sequence in one
// launch per 64 sequences, each token's bits those of its sequence's own launch.
void rope_and_store_batch(Tensor& q, Tensor& k, const Tensor& v, const RopeTable& table, std::span<const RopeStoreSequence> seqs);
void norm_rope_and_store_batch(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                               Tensor& k, const Tensor& v, const RopeTable& table, std::span<const RopeStoreSequence> seqs);
void softmax(Tensor& x);
void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);
void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out);
void add(const Tensor& a, const Tensor& b, Tensor& out);
void add_bias(Tensor& y, const Tensor& bias);
void copy(const Tensor& src, Tensor& dst);
// dst f32, or bf16 (a KV cache's rows: rounded to nearest even, the CPU's f32_to_bf16 bits).
void store_rows(const Tensor& src, Tensor& dst, int64_t row0, const int32_t* device_row0);
// gate (ops::gated_attention), where given: out * sigmoid(gate) written instead of out; only where
// attention_takes_gate(queries).
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, const int32_t* device_q_pos0, float scale, Tensor& out,
               const Tensor* gate = nullptr);
// ops::attention over a KV cache in a stored format (ops/kv_format.h): keys and values both f32, bf16
// or q8, or q8 keys with q4 values (q4v); k and v the cache's rows; gate as above.
void attention_kv(const Tensor& q, const KvRows& k, const KvRows& v, int64_t q_pos0, const int32_t* device_q_pos0, float scale, Tensor& out,
                  const Tensor* gate = nullptr);
// attention_kv for several calls at once (a decode step's sequences, each over its own cache): the
// calls the decode kernel takes go out in as few launches as their launch shapes allow, the others
// one by one; every call's bits are those of its own attention_kv.
struct AttentionCall {
  const Tensor* q;
  const KvRows* k;
  const KvRows* v;
  int64_t q_pos0;
  Tensor* out;
  const Tensor* gate;                      // nullptr: none
  const int32_t* q_pos0_device = nullptr;  // as attention_kv's device_q_pos0 (a recorded step)
};
void attention_kv_batch(std::span<const AttentionCall> calls, float scale);
// ops::store_kv_rows into a q8 or q4 cache side: src (n, kv_heads * head_dim) f32 rows to dst rows
// [row0, row0 + n), quantized to the bytes the CPU's store writes. (A bf16 cache takes store_rows, which rounds.)
void store_kv_rows(const Tensor& src, const KvRows& dst, int64_t row0, const int32_t* device_row0);
bool attention_takes_gate(int64_t queries);
bool attention_gives_bf16(int64_t queries, int64_t head_dim);
void causal_conv1d_silu_taps(const Tensor& x, Tensor& state, const Tensor& taps, Tensor& out);
void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                      const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out, GatedDeltaAlgorithm algorithm);
void causal_conv1d_silu_taps_rows(const Tensor& x, std::span<const int64_t> rows, std::span<Tensor* const> states, const Tensor& taps,
                                  Tensor& out);
void gated_delta_rule_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                           const Tensor& dt_bias, const GatedDeltaShape& shape, std::span<const int64_t> rows,
                           std::span<Tensor* const> states, Tensor& out);
void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out);
void copy_rows(const Tensor& src, std::span<const int32_t> src_rows, Tensor& dst, std::span<const int32_t> dst_rows);
void moe_combine(const Tensor& per_rank, std::span<const float> weights, const Tensor* shared, std::span<const float> shared_weights,
                 Tensor& out);
void moe_route(const Tensor& logits, const MoeRouting& routing, Tensor& ids, Tensor& weights, int32_t appended_id);
void expert_matmul(const Tensor& x, const ExpertSet& experts, const Tensor& ids, Tensor& y);
void moe_combine_device(const Tensor& per_rank, const Tensor& weights, const Tensor* shared, const Tensor* shared_logit, Tensor& out);
void moe_combine_shared_rank(const Tensor& per_rank, const Tensor& weights, const Tensor& shared_logit, Tensor& out);
// The vision encoder's ops (encoder_norms.cu, encoder_attention.cu). encoder_matmul_f32: a dense
// or quantized row-layout weight as one f32 cuBLAS GEMM without TF32.
void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out);
void gelu(const Tensor& x, Tensor& out, GeluKind kind);
void full_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out);
void encoder_matmul_f32(const Tensor& x, const Weight& w, Tensor& y);

}  // namespace sanctum::ops::cuda

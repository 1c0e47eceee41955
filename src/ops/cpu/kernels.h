#pragma once
// Entry points of the CPU backend (Highway kernels, dynamic dispatch). Same signatures as the ops;
// arguments are already checked by the front ends in src/ops/*.cc.
#include <cstdint>
#include <span>

#include "ops/kv_format.h"
#include "ops/rope.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops::cpu {

void matmul_dense(const Tensor& x, const Weight& w, Tensor& y);
void matmul_quantized(const Tensor& x, const Weight& w, Tensor& y);
// MatmulPrecision::int8: x quantized to int8 per weight group, integer dot products (matmul_int8.cc).
void matmul_quantized_int8(const Tensor& x, const Weight& w, Tensor& y);
// This CPU runs the VNNI int8 kernels (the portable loops elsewhere are no faster than f32).
bool int8_vnni_available();
void prepare_weight(Weight& w);
// For MatmulPrecision::int8: copies a quantized weight into the layout the int8 kernels read
// (int8_weight.h, in w.packed) where this CPU runs those (VNNI) kernels, and releases the
// checkpoint's mapped pages of it. Idempotent.
void prepare_weight_int8(Weight& w);
void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, float weight_offset);
void rope(Tensor& x, std::span<const int32_t> positions, const RopeTable& table);
void softmax(Tensor& x);
void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);
void add(const Tensor& a, const Tensor& b, Tensor& out);
void add_bias(Tensor& y, const Tensor& bias);
void copy(const Tensor& src, Tensor& dst);
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, float scale, Tensor& out);
// The same reading a KV cache in any stored format; k and v hold q_pos0 + n rows. A prefill over
// bf16 transposes the keys into scratch of at most max_transposed_bytes (ops/kv_format.h).
void attention_kv(const Tensor& q, const KvRows& k, const KvRows& v, int64_t q_pos0, float scale, Tensor& out,
                  int64_t max_transposed_bytes = kMaxTransposedKeyBytes);

// One sequence of a batched attention call: queries q (n, n_heads, head_dim) f32 at positions
// q_pos0 .. q_pos0 + n - 1, its cache sides in any format (at least q_pos0 + n rows), out like q.
struct AttentionSeq {
  Tensor q;
  KvRows k, v;
  int64_t q_pos0 = 0;
  Tensor out;
};
// attention_kv for every sequence, their queries' tasks in one parallel region (attention_batch.cc);
// each sequence's result has the bits it has alone.
void attention_batch(std::span<const AttentionSeq> seqs, float scale, int64_t max_transposed_bytes = kMaxTransposedKeyBytes);
// A prefill over a bf16 cache: the keys transposed, then the queries (attention_kv.cc).
void attention_kv_transposed(const AttentionSeq& seq, float scale, int64_t max_transposed_bytes);
// The greedy pick of a row (sampling.cc): ref::argmax_row's index, among the ids allowed's bits
// leave (words u32 of them; ids past words * 32 never) when allowed is set.
int32_t argmax_row(std::span<const float> logits, const uint32_t* allowed = nullptr, int64_t words = 0);
void argmax_rows(const Tensor& logits, Tensor& ids, const Tensor& allowed);
// src (n, kv_heads * head_dim) f32 into dst rows [row0, row0 + n), converted (kv_quantize.cc).
void store_kv_rows(const Tensor& src, const KvRows& dst, int64_t row0);

}  // namespace sanctum::ops::cpu

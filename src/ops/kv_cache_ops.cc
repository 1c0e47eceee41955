#include "ops/kv_cache_ops.h"

#include <string>

#include "ops/attention.h"
#include "ops/cpu/kernels.h"
#include "ops/elementwise.h"
#include "ops/gating.h"
#include "ops/op_util.h"
#include "ops/rms_norm.h"
#include "ops/rope_store.h"

namespace sanctum::ops {

namespace {
bool is_f32(const KvRows& r) { return r.format == KvFormat::f32; }

// f32 rows as the f32 ops take them: (rows, kv_heads * head_dim).
Tensor rows_2d(const KvRows& r) { return r.data.reshape({r.rows(), r.kv_heads() * r.head_dim}); }

// The checks every op on a converted cache makes: its storage is on the CPU, shaped as the format says.
void check_cache(const char* op, const KvRows& r) {
  detail::require_defined(op, "cache", r.data);
  SANCTUM_REQUIRE(r.data.device() == Device::cpu, op,
                  "a KV cache in bf16, q8 or q4 runs on the CPU only; use --kv-cache-dtype f32 with --device cuda", ErrorKind::unsupported);
  SANCTUM_REQUIRE(r.data.ndim() == 3 && r.head_dim > 0, op, "cache data must be (rows, kv_heads, width), got " + r.data.shape_string());
  detail::require_inner_contiguous(op, "cache", r.data);
  const bool quantized = r.format == KvFormat::q8 || r.format == KvFormat::q4;
  SANCTUM_REQUIRE(!quantized || (r.scales && r.scales.dim(0) == r.rows() && r.scales.dim(1) == r.kv_heads()), op,
                  "a q8/q4 cache needs scales of its rows and heads");
}

int64_t first_row(const Positions& positions) {
  return positions.device != nullptr ? positions.device->data<int32_t>()[0] : positions.first();
}
}  // namespace

void store_kv_rows(const Tensor& src, const KvRows& dst, const Positions& positions) {
  constexpr const char* kOp = "store_kv_rows";
  if (is_f32(dst)) {
    Tensor rows = rows_2d(dst);
    return store_rows(src, rows, positions);
  }
  check_cache(kOp, dst);
  detail::require_defined(kOp, "src", src);
  detail::require_dtype(kOp, "src", src, DType::f32);
  SANCTUM_REQUIRE(src.device() == Device::cpu, kOp, "src must be on the CPU with the cache");
  SANCTUM_REQUIRE(src.ndim() == 2 && src.dim(1) == dst.kv_heads() * dst.head_dim, kOp,
                  "src " + src.shape_string() + " must be (n, kv_heads * head_dim) of the cache");
  detail::require_inner_contiguous(kOp, "src", src);
  const int64_t n = src.dim(0), first = first_row(positions);
  SANCTUM_REQUIRE(positions.size() == n, kOp, std::to_string(positions.size()) + " positions for " + std::to_string(n) + " rows");
  SANCTUM_REQUIRE(first >= 0 && first + n <= dst.rows(), kOp,
                  "rows [" + std::to_string(first) + ", " + std::to_string(first + n) + ") are outside the cache's " +
                      std::to_string(dst.rows()));
  if (n > 0) cpu::store_kv_rows(src, dst, first);
}

void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, const KvRows& cache_k,
                    const KvRows& cache_v) {
  if (is_f32(cache_k) && is_f32(cache_v)) {
    Tensor ck = rows_2d(cache_k), cv = rows_2d(cache_v);
    return rope_and_store(q, k, v, positions, table, ck, cv);
  }
  detail::require_defined("rope_and_store", "k", k);
  SANCTUM_REQUIRE(k.ndim() == 3, "rope_and_store", "k must be 3-D (tokens, heads, head_dim), got " + k.shape_string());
  check_cache("rope_and_store", cache_k);
  check_cache("rope_and_store", cache_v);
  rope(q, positions, table);
  rope(k, positions, table);
  store_kv_rows(k.reshape({k.dim(0), k.dim(1) * k.dim(2)}), cache_k, positions);
  store_kv_rows(v, cache_v, positions);
}

void norm_rope_and_store(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                         Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, const KvRows& cache_k,
                         const KvRows& cache_v) {
  if (is_f32(cache_k) && is_f32(cache_v)) {
    Tensor ck = rows_2d(cache_k), cv = rows_2d(cache_v);
    return norm_rope_and_store(q_in, q_norm, k_norm, eps, weight_offset, q, k, v, positions, table, ck, cv);
  }
  check_cache("norm_rope_and_store", cache_k);
  check_cache("norm_rope_and_store", cache_v);
  SANCTUM_REQUIRE(q.ndim() == 3 && k.ndim() == 3, "norm_rope_and_store",
                  "q " + q.shape_string() + " and k " + k.shape_string() + " must be 3-D (tokens, heads, head_dim)");
  Tensor q_rows = q.reshape({q.dim(0) * q.dim(1), q.dim(2)}), k_rows = k.reshape({k.dim(0) * k.dim(1), k.dim(2)});
  rms_norm(q_in, q_norm, eps, q_rows, weight_offset);
  rms_norm(k_rows, k_norm, eps, k_rows, weight_offset);
  rope_and_store(q, k, v, positions, table, cache_k, cache_v);
}

void attention(const Tensor& q, const KvRows& k, const KvRows& v, const Positions& positions, float scale, Tensor& out) {
  constexpr const char* kOp = "attention";
  if (is_f32(k) && is_f32(v)) return attention(q, k.data, v.data, positions, scale, out);
  check_cache(kOp, k);
  check_cache(kOp, v);
  detail::require_defined(kOp, "q", q);
  detail::require_defined(kOp, "out", out);
  detail::require_dtype(kOp, "q", q, DType::f32);
  detail::require_dtype(kOp, "out", out, DType::f32);
  SANCTUM_REQUIRE(q.device() == Device::cpu && out.device() == Device::cpu, kOp, "q and out must be on the CPU with the cache");
  SANCTUM_REQUIRE(q.ndim() == 3 && detail::same_shape(q, out), kOp, "out " + out.shape_string() + " must match q " + q.shape_string());
  detail::require_inner_contiguous(kOp, "q", q);
  detail::require_inner_contiguous(kOp, "out", out);
  SANCTUM_REQUIRE(k.head_dim == q.dim(2) && v.head_dim == q.dim(2), kOp,
                  "head_dim differs: q has " + std::to_string(q.dim(2)) + ", the cache " + std::to_string(k.head_dim));
  SANCTUM_REQUIRE(k.kv_heads() > 0 && k.kv_heads() == v.kv_heads() && q.dim(1) % k.kv_heads() == 0, kOp,
                  "n_heads " + std::to_string(q.dim(1)) + " is not a multiple of the cache's n_kv_heads " + std::to_string(k.kv_heads()));
  SANCTUM_REQUIRE(positions.size() == q.dim(0), kOp,
                  std::to_string(positions.size()) + " positions for " + std::to_string(q.dim(0)) + " queries");
  const int64_t first = first_row(positions);
  SANCTUM_REQUIRE(first >= 0 && k.rows() >= first + q.dim(0) && v.rows() >= first + q.dim(0), kOp,
                  "the cache holds " + std::to_string(k.rows()) + " rows, queries need " + std::to_string(first + q.dim(0)));
  if (q.dim(0) == 0 || q.dim(1) == 0) return;
  cpu::attention_kv(q, k, v, first, scale, out);
}

void gated_attention(const Tensor& q, const KvRows& k, const KvRows& v, const Positions& positions, float scale, const Tensor& gate,
                     Tensor& out) {
  if (is_f32(k) && is_f32(v)) return gated_attention(q, k.data, v.data, positions, scale, gate, out);
  constexpr const char* kOp = "attention";
  detail::require_defined(kOp, "gate", gate);
  detail::require_dtype(kOp, "gate", gate, DType::f32);
  SANCTUM_REQUIRE(gate.ndim() == 3 && detail::same_shape(gate, out), kOp,
                  "gate " + gate.shape_string() + " must match out " + out.shape_string());
  detail::require_inner_contiguous(kOp, "gate", gate);
  const auto rows = [](const Tensor& t) { return t.reshape({t.dim(0) * t.dim(1), t.dim(2)}); };
  const Tensor gate_rows = rows(gate);
  attention(q, k, v, positions, scale, out);
  Tensor out_rows = rows(out);
  sigmoid_mul(out_rows, gate_rows, out_rows);
}

}  // namespace sanctum::ops

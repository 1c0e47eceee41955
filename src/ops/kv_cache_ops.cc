#include "ops/kv_cache_ops.h"

#include <string>
#include <vector>

#include "ops/attention.h"
#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/elementwise.h"
#include "ops/gated_output.h"
#include "ops/op_util.h"
#include "ops/rms_norm.h"
#include "ops/rope_store.h"

namespace sanctum::ops {

namespace {
bool is_f32(const KvRows& r) { return r.format == KvFormat::f32; }
// A bf16 cache on a GPU: the f32 ops' kernels store into it (rounding) and the GPU attention reads it.
bool gpu_bf16(const KvRows& r) { return r.format == KvFormat::bf16 && r.data && r.data.device() == Device::cuda; }

// f32 or bf16 rows as the row ops take them: (rows, kv_heads * head_dim).
Tensor rows_2d(const KvRows& r) { return r.data.reshape({r.rows(), r.kv_heads() * r.head_dim}); }

// The checks every op on a converted cache makes: its storage shaped as the format says.
void check_cache(const char* op, const KvRows& r) {
  detail::require_defined(op, "cache", r.data);
  SANCTUM_REQUIRE(r.data.ndim() == 3 && r.head_dim > 0, op, "cache data must be (rows, kv_heads, width), got " + r.data.shape_string());
  detail::require_inner_contiguous(op, "cache", r.data);
  const bool quantized = r.format == KvFormat::q8 || r.format == KvFormat::q4;
  SANCTUM_REQUIRE(!quantized || (r.scales && r.scales.dim(0) == r.rows() && r.scales.dim(1) == r.kv_heads()), op,
                  "a q8/q4 cache needs scales of its rows and heads");
  SANCTUM_REQUIRE(!quantized || r.scales.device() == r.data.device(), op, "a cache's scales must be on its data's device");
}

int64_t first_row(const Positions& positions) {
  return positions.device != nullptr ? positions.device->data<int32_t>()[0] : positions.first();
}

// The first row the positions name: on a GPU the host's copy (the kernels read the device's), on the
// CPU the positions' own.
int64_t first_row(const Positions& positions, Device device) {
  if (device == Device::cuda) return positions.first();
  return first_row(positions);
}

// store_kv_rows's checks of src and dst; returns the first row written.
int64_t check_store(const char* op, const Tensor& src, const KvRows& dst, const Positions& positions) {
  check_cache(op, dst);
  detail::require_defined(op, "src", src);
  detail::require_dtype(op, "src", src, DType::f32);
  const Device device = dst.data.device();
  SANCTUM_REQUIRE(src.device() == device, op, "src must be on the cache's device");
  SANCTUM_REQUIRE(src.ndim() == 2 && src.dim(1) == dst.kv_heads() * dst.head_dim, op,
                  "src " + src.shape_string() + " must be (n, kv_heads * head_dim) of the cache");
  detail::require_inner_contiguous(op, "src", src);
  if (positions.device != nullptr && device == Device::cuda) detail::require_device_positions(op, positions, device);
  const int64_t n = src.dim(0), first = first_row(positions, device);
  SANCTUM_REQUIRE(positions.size() == n, op, std::to_string(positions.size()) + " positions for " + std::to_string(n) + " rows");
  SANCTUM_REQUIRE(first >= 0 && first + n <= dst.rows(), op,
                  "rows [" + std::to_string(first) + ", " + std::to_string(first + n) + ") are outside the cache's " +
                      std::to_string(dst.rows()));
  return first;
}

// attention's checks over a cache of any format; returns the first query's position (on a GPU the
// host's copy).
int64_t check_cache_attention(const Tensor& q, const KvRows& k, const KvRows& v, const Positions& positions, const Tensor& out) {
  constexpr const char* kOp = "attention";
  check_cache(kOp, k);
  check_cache(kOp, v);
  detail::require_defined(kOp, "q", q);
  detail::require_defined(kOp, "out", out);
  const Device device = k.data.device();
  SANCTUM_REQUIRE(q.device() == device && out.device() == device && v.data.device() == device, kOp,
                  "q, out and the cache must be on one device");
  detail::require_dtype(kOp, "q", q, DType::f32);
  // out may be bf16 on the GPU, contiguous (attention_output_dtype).
  if (device != Device::cuda || out.dtype() != DType::bf16 || !out.is_contiguous()) detail::require_dtype(kOp, "out", out, DType::f32);
  SANCTUM_REQUIRE(q.ndim() == 3 && detail::same_shape(q, out), kOp, "out " + out.shape_string() + " must match q " + q.shape_string());
  detail::require_inner_contiguous(kOp, "q", q);
  detail::require_inner_contiguous(kOp, "out", out);
  SANCTUM_REQUIRE(k.head_dim == q.dim(2) && v.head_dim == q.dim(2), kOp,
                  "head_dim differs: q has " + std::to_string(q.dim(2)) + ", the cache " + std::to_string(k.head_dim));
  SANCTUM_REQUIRE(k.kv_heads() > 0 && k.kv_heads() == v.kv_heads() && q.dim(1) % k.kv_heads() == 0, kOp,
                  "n_heads " + std::to_string(q.dim(1)) + " is not a multiple of the cache's n_kv_heads " + std::to_string(k.kv_heads()));
  SANCTUM_REQUIRE(positions.size() == q.dim(0), kOp,
                  std::to_string(positions.size()) + " positions for " + std::to_string(q.dim(0)) + " queries");
  if (positions.device != nullptr && device == Device::cuda) detail::require_device_positions(kOp, positions, device);
  const int64_t first = first_row(positions, device);
  SANCTUM_REQUIRE(first >= 0 && k.rows() >= first + q.dim(0) && v.rows() >= first + q.dim(0), kOp,
                  "the cache holds " + std::to_string(k.rows()) + " rows, queries need " + std::to_string(first + q.dim(0)));
  return first;
}

// attention over a converted cache; gate, where given (a GPU that takes it), applied on the way out.
void cache_attention(const Tensor& q, const KvRows& k, const KvRows& v, const Positions& positions, float scale, const Tensor* gate,
                     Tensor& out) {
  const int64_t first = check_cache_attention(q, k, v, positions, out);
  if (q.dim(0) == 0 || q.dim(1) == 0) return;
  if (k.data.device() == Device::cuda) {
    // The GPU kernels size their launches by the cache's capacity, recorded or not (as the f32 op).
    const int32_t* device_first = positions.device != nullptr ? positions.device->data<int32_t>() : nullptr;
    return cuda::attention_kv(q, k, v, first, device_first, scale, out, gate);
  }
  cpu::attention_kv(q, k, v, first, scale, out);
}

// store_kv_rows's checks for either route it takes (the row ops' for f32 caches).
void check_store_any(const char* op, const Tensor& src, const KvRows& dst, const Positions& positions) {
  if (is_f32(dst) || gpu_bf16(dst)) {
    check_cache(op, dst);
    check_store_rows(src, rows_2d(dst), positions);
  } else {
    check_store(op, src, dst, positions);
  }
}

// Rows [s.begin, s.end) of t.
Tensor rows_of(const Tensor& t, const SequenceCache& s) { return t.slice(0, s.begin, s.end); }

// The sequences' rows lie in the batch's n rows, their positions are theirs in `positions` (when
// given), and they share q's device; returns whether they run one by one (one sequence, or a GPU).
bool check_sequences(const char* op, const Tensor& q, std::span<const SequenceCache> seqs, std::span<const int32_t> positions) {
  detail::require_defined(op, "q", q);
  const int64_t n = q.ndim() > 0 ? q.dim(0) : 0;
  for (const SequenceCache& s : seqs) {
    SANCTUM_REQUIRE(0 <= s.begin && s.begin <= s.end && s.end <= n, op,
                    "a sequence's rows [" + std::to_string(s.begin) + ", " + std::to_string(s.end) + ") are outside the batch's " +
                        std::to_string(n));
    SANCTUM_REQUIRE(s.positions.size() == s.end - s.begin, op,
                    std::to_string(s.positions.size()) + " positions for a sequence of " + std::to_string(s.end - s.begin) + " rows");
    SANCTUM_REQUIRE(positions.empty() || s.begin == s.end ||
                        (static_cast<int64_t>(positions.size()) == n && positions[static_cast<size_t>(s.begin)] == s.positions.first()),
                    op, "the batch's positions must be each sequence's, row by row");
  }
  return seqs.size() <= 1 || q.device() == Device::cuda;
}

// Two or more sequences on a GPU whose caches all take the rotations' one launch (f32 rows, or the
// GPU's bf16 rows): they go to the batched rope_store ops, which launch them together.
bool row_caches(const Tensor& q, std::span<const SequenceCache> seqs) {
  if (q.device() != Device::cuda || seqs.size() < 2) return false;
  for (const SequenceCache& s : seqs)
    if (!((is_f32(s.k) && is_f32(s.v)) || (gpu_bf16(s.k) && gpu_bf16(s.v)))) return false;
  return true;
}

std::vector<RopeStoreRows> rope_store_rows(std::span<const SequenceCache> seqs) {
  std::vector<RopeStoreRows> out;
  out.reserve(seqs.size());
  for (const SequenceCache& s : seqs) out.push_back({s.begin, s.end, s.positions, rows_2d(s.k), rows_2d(s.v)});
  return out;
}
}  // namespace

void store_kv_rows(const Tensor& src, const KvRows& dst, const Positions& positions) {
  constexpr const char* kOp = "store_kv_rows";
  if (is_f32(dst) || gpu_bf16(dst)) {  // store_rows rounds into a GPU's bf16 rows
    Tensor rows = rows_2d(dst);
    return store_rows(src, rows, positions);
  }
  const int64_t first = check_store(kOp, src, dst, positions);
  if (src.dim(0) == 0) return;
  if (dst.data.device() == Device::cuda)
    return cuda::store_kv_rows(src, dst, first, positions.device != nullptr ? positions.device->data<int32_t>() : nullptr);
  cpu::store_kv_rows(src, dst, first);
}

void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, const KvRows& cache_k,
                    const KvRows& cache_v) {
  if ((is_f32(cache_k) && is_f32(cache_v)) || (gpu_bf16(cache_k) && gpu_bf16(cache_v))) {  // one launch on a GPU
    Tensor ck = rows_2d(cache_k), cv = rows_2d(cache_v);
    return rope_and_store(q, k, v, positions, table, ck, cv);
  }
  detail::require_defined("rope_and_store", "k", k);
  SANCTUM_REQUIRE(k.ndim() == 3, "rope_and_store", "k must be 3-D (tokens, heads, head_dim), got " + k.shape_string());
  const Tensor k_rows = k.reshape({k.dim(0), k.dim(1) * k.dim(2)});
  check_store("rope_and_store", k_rows, cache_k, positions);  // before anything is rotated
  check_store("rope_and_store", v, cache_v, positions);
  rope(q, positions, table);
  rope(k, positions, table);
  store_kv_rows(k_rows, cache_k, positions);
  store_kv_rows(v, cache_v, positions);
}

void norm_rope_and_store(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                         Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, const KvRows& cache_k,
                         const KvRows& cache_v) {
  if ((is_f32(cache_k) && is_f32(cache_v)) || (gpu_bf16(cache_k) && gpu_bf16(cache_v))) {  // one launch on a GPU
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
  if (is_f32(k) && is_f32(v)) return attention(q, k.data, v.data, positions, scale, out);
  cache_attention(q, k, v, positions, scale, nullptr, out);
}

void gated_attention(const Tensor& q, const KvRows& k, const KvRows& v, const Positions& positions, float scale, const Tensor& gate,
                     Tensor& out) {
  if (is_f32(k) && is_f32(v)) return gated_attention(q, k.data, v.data, positions, scale, gate, out);
  detail::gate_attention_output(q, gate, out, [&](const Tensor* g) { cache_attention(q, k, v, positions, scale, g, out); });
}

void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, std::span<const int32_t> positions, const RopeTable& table,
                    std::span<const SequenceCache> seqs) {
  constexpr const char* kOp = "rope_and_store";
  if (check_sequences(kOp, q, seqs, positions)) {
    if (row_caches(q, seqs)) return rope_and_store(q, k, v, table, rope_store_rows(seqs));
    for (const SequenceCache& s : seqs) {
      Tensor qs = rows_of(q, s), ks = rows_of(k, s);
      rope_and_store(qs, ks, rows_of(v, s), s.positions, table, s.k, s.v);
    }
    return;
  }
  detail::require_defined(kOp, "k", k);
  SANCTUM_REQUIRE(k.ndim() == 3 && k.dim(0) == q.dim(0), kOp, "k must be (tokens, heads, head_dim) of q's tokens, got " + k.shape_string());
  const Tensor k_rows = k.reshape({k.dim(0), k.dim(1) * k.dim(2)});
  for (const SequenceCache& s : seqs) {  // before anything is rotated
    check_store_any(kOp, rows_of(k_rows, s), s.k, s.positions);
    check_store_any(kOp, rows_of(v, s), s.v, s.positions);
  }
  rope(q, positions, table);
  rope(k, positions, table);
  for (const SequenceCache& s : seqs) {
    store_kv_rows(rows_of(k_rows, s), s.k, s.positions);
    store_kv_rows(rows_of(v, s), s.v, s.positions);
  }
}

void norm_rope_and_store(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                         Tensor& k, const Tensor& v, std::span<const int32_t> positions, const RopeTable& table,
                         std::span<const SequenceCache> seqs) {
  constexpr const char* kOp = "norm_rope_and_store";
  SANCTUM_REQUIRE(q.ndim() == 3 && k.ndim() == 3, kOp,
                  "q " + q.shape_string() + " and k " + k.shape_string() + " must be 3-D (tokens, heads, head_dim)");
  if (check_sequences(kOp, q, seqs, positions)) {
    if (row_caches(q, seqs)) return norm_rope_and_store(q_in, q_norm, k_norm, eps, weight_offset, q, k, v, table, rope_store_rows(seqs));
    const int64_t heads = q.dim(1);
    for (const SequenceCache& s : seqs) {
      Tensor qs = rows_of(q, s), ks = rows_of(k, s);
      norm_rope_and_store(q_in.slice(0, s.begin * heads, s.end * heads), q_norm, k_norm, eps, weight_offset, qs, ks, rows_of(v, s),
                          s.positions, table, s.k, s.v);
    }
    return;
  }
  const Tensor k_flat = k.reshape({k.dim(0), k.dim(1) * k.dim(2)});
  for (const SequenceCache& s : seqs) {  // before anything is written
    check_store_any(kOp, rows_of(k_flat, s), s.k, s.positions);
    check_store_any(kOp, rows_of(v, s), s.v, s.positions);
  }
  Tensor q_rows = q.reshape({q.dim(0) * q.dim(1), q.dim(2)}), k_rows = k.reshape({k.dim(0) * k.dim(1), k.dim(2)});
  rms_norm(q_in, q_norm, eps, q_rows, weight_offset);
  rms_norm(k_rows, k_norm, eps, k_rows, weight_offset);
  rope_and_store(q, k, v, positions, table, seqs);
}

namespace {

// On a GPU, a step's sequences (two or more) in as few launches as cuda::attention_kv_batch makes,
// each sequence's bits those of its own call (device positions: a recorded step's); false where that
// does not apply (the caller then runs them one by one).
bool gpu_attention_batch(const Tensor& q, std::span<const SequenceCache> seqs, float scale, const Tensor* gate, Tensor& out) {
  if (q.device() != Device::cuda || seqs.size() < 2 || q.dim(1) == 0) return false;
  for (const SequenceCache& s : seqs)
    if (gate != nullptr && !cuda::attention_takes_gate(s.end - s.begin)) return false;
  std::vector<Tensor> qs, outs, gates;
  std::vector<int64_t> firsts;
  for (const SequenceCache& s : seqs) {
    qs.push_back(rows_of(q, s));
    outs.push_back(rows_of(out, s));
    if (gate != nullptr) gates.push_back(rows_of(*gate, s));
    firsts.push_back(check_cache_attention(qs.back(), s.k, s.v, s.positions, outs.back()));
  }
  std::vector<cuda::AttentionCall> calls;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Tensor* device = seqs[i].positions.device;
    calls.push_back({&qs[i], &seqs[i].k, &seqs[i].v, firsts[i], &outs[i], gate != nullptr ? &gates[i] : nullptr,
                     device != nullptr ? device->data<int32_t>() : nullptr});
  }
  cuda::attention_kv_batch(calls, scale);
  return true;
}

}  // namespace

void attention(const Tensor& q, std::span<const SequenceCache> seqs, float scale, Tensor& out) {
  if (check_sequences("attention", q, seqs, {})) {
    if (gpu_attention_batch(q, seqs, scale, nullptr, out)) return;
    for (const SequenceCache& s : seqs) {
      Tensor os = rows_of(out, s);
      attention(rows_of(q, s), s.k, s.v, s.positions, scale, os);
    }
    return;
  }
  std::vector<cpu::AttentionSeq> batch;
  for (const SequenceCache& s : seqs) {
    const Tensor qs = rows_of(q, s), os = rows_of(out, s);
    const int64_t first = check_cache_attention(qs, s.k, s.v, s.positions, os);
    if (qs.dim(0) > 0 && qs.dim(1) > 0) batch.push_back({qs, s.k, s.v, first, os});
  }
  cpu::attention_batch(batch, scale);
}

void gated_attention(const Tensor& q, std::span<const SequenceCache> seqs, float scale, const Tensor& gate, Tensor& out) {
  if (check_sequences("attention", q, seqs, {})) {
    if (gpu_attention_batch(q, seqs, scale, &gate, out)) return;
    for (const SequenceCache& s : seqs) {
      Tensor os = rows_of(out, s);
      gated_attention(rows_of(q, s), s.k, s.v, s.positions, scale, rows_of(gate, s), os);
    }
    return;
  }
  // on the CPU the gate goes over every row once the batch's attention is done
  detail::gate_attention_output(q, gate, out, [&](const Tensor*) { attention(q, seqs, scale, out); });
}

}  // namespace sanctum::ops

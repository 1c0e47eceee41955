#include "ops/rope_store.h"

#include <vector>

#include "ops/cuda/kernels.h"
#include "ops/elementwise.h"
#include "ops/op_util.h"
#include "ops/rms_norm.h"

namespace sanctum::ops {

namespace {
// The checks of the four ops rope_and_store stands for (rope, rope, store_rows, store_rows), before
// anything runs; on a GPU also what its one launch reads: q and k as heads of one head_dim, and v's
// rows as k's width. Returns their device.
Device check_rope_and_store(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Positions& positions,
                            const RopeTable& table, const Tensor& cache_k, const Tensor& cache_v) {
  detail::require_defined(op, "k", k);
  SANCTUM_REQUIRE(k.ndim() == 3, op, "k must be 3-D (tokens, heads, head_dim), got " + k.shape_string());
  const Device device = check_rope(q, positions.host.size(), table);
  check_rope(k, positions.host.size(), table);
  check_store_rows(k.reshape({k.dim(0), k.dim(1) * k.dim(2)}), cache_k, positions);
  check_store_rows(v, cache_v, positions);
  detail::require_one_device(op, {{"q", &q}, {"k", &k}, {"v", &v}, {"cache_k", &cache_k}, {"cache_v", &cache_v}});
  if (device == Device::cuda) {
    SANCTUM_REQUIRE(q.dim(2) == k.dim(2) && v.dim(1) == k.dim(1) * k.dim(2), op,
                    "q " + q.shape_string() + ", k " + k.shape_string() + " and v " + v.shape_string() +
                        " must share head_dim and k's width");
    SANCTUM_REQUIRE(cache_k.dtype() == cache_v.dtype(), op,
                    "cache_k " + cache_k.shape_string() + " and cache_v " + cache_v.shape_string() + " must be of one dtype");
  }
  return device;
}

// The head norms' checks of norm_rope_and_store (the rms_norm calls it stands for).
void check_norms(const char* op, const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& q,
                 const Tensor& k) {
  detail::require_defined(op, "q_in", q_in);
  detail::require_defined(op, "q", q);
  detail::require_defined(op, "k", k);
  SANCTUM_REQUIRE(q.ndim() == 3 && k.ndim() == 3, op,
                  "q " + q.shape_string() + " and k " + k.shape_string() + " must be 3-D (tokens, heads, head_dim)");
  SANCTUM_REQUIRE(q_in.ndim() == 2 && q_in.dim(0) == q.dim(0) * q.dim(1) && q_in.dim(1) == q.dim(2), op,
                  "q_in " + q_in.shape_string() + " must hold q " + q.shape_string() + "'s rows");
  detail::require_dtype(op, "q_in", q_in, DType::f32);
  detail::require_inner_contiguous(op, "q_in", q_in);
  for (const Tensor* w : {&q_norm, &k_norm}) {
    detail::require_defined(op, "norm weight", *w);
    detail::require_float(op, "norm weight", *w);
    SANCTUM_REQUIRE(w->ndim() == 1 && w->dim(0) == q.dim(2) && w->dim(0) == k.dim(2), op,
                    "norm weights must be (head_dim) of q and k, got " + w->shape_string());
    detail::require_inner_contiguous(op, "norm weight", *w);
  }
  SANCTUM_REQUIRE(eps >= 0.0f, op, "eps must be >= 0");
}

// Rows [s.begin, s.end) of t.
Tensor rows_of(const Tensor& t, const RopeStoreRows& s) { return t.slice(0, s.begin, s.end); }

// Whether the sequences' rotations and stores go out together (cuda::rope_and_store_batch): two or
// more on a GPU, their rows consecutive, every cache side of one dtype. Each sequence's checks are run
// first either way (by the caller).
bool one_launch(const Tensor& q, std::span<const RopeStoreRows> seqs) {
  if (q.device() != Device::cuda || seqs.size() < 2) return false;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const RopeStoreRows& s = seqs[i];
    if (s.end <= s.begin || (i > 0 && s.begin != seqs[i - 1].end)) return false;
    if (s.cache_k.dtype() != seqs[0].cache_k.dtype() || s.cache_v.dtype() != seqs[0].cache_k.dtype()) return false;
  }
  return true;
}

std::vector<cuda::RopeStoreSequence> device_sequences(std::span<const RopeStoreRows> seqs) {
  std::vector<cuda::RopeStoreSequence> out;
  for (const RopeStoreRows& s : seqs)
    out.push_back({s.begin, s.end, s.positions.host, s.positions.device != nullptr ? s.positions.device->data<int32_t>() : nullptr,
                   s.cache_k, s.cache_v});
  return out;
}
}  // namespace

void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, Tensor& cache_k,
                    Tensor& cache_v) {
  const Device device = check_rope_and_store("rope_and_store", q, k, v, positions, table, cache_k, cache_v);
  if (device != Device::cuda) {
    const Tensor k_rows = k.reshape({k.dim(0), k.dim(1) * k.dim(2)});  // each token's heads contiguous
    rope(q, positions, table);
    rope(k, positions, table);
    store_rows(k_rows, cache_k, positions);
    return store_rows(v, cache_v, positions);
  }
  if (k.dim(0) == 0) return;
  cuda::rope_and_store(q, k, v, positions.host, positions.device != nullptr ? positions.device->data<int32_t>() : nullptr, table, cache_k,
                       cache_v);
}

void norm_rope_and_store(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                         Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, Tensor& cache_k, Tensor& cache_v) {
  constexpr const char* kOp = "norm_rope_and_store";
  check_norms(kOp, q_in, q_norm, k_norm, eps, q, k);
  const Device device = check_rope_and_store(kOp, q, k, v, positions, table, cache_k, cache_v);
  detail::require_one_device(kOp, {{"q_in", &q_in}, {"q_norm", &q_norm}, {"k_norm", &k_norm}, {"q", &q}});
  if (device != Device::cuda || !cuda::norm_rope_and_store_fused(q_in, q, k)) {
    Tensor q_rows = q.reshape({q.dim(0) * q.dim(1), q.dim(2)}), k_rows = k.reshape({k.dim(0) * k.dim(1), k.dim(2)});
    rms_norm(q_in, q_norm, eps, q_rows, weight_offset);
    rms_norm(k_rows, k_norm, eps, k_rows, weight_offset);
    return rope_and_store(q, k, v, positions, table, cache_k, cache_v);
  }
  if (k.dim(0) == 0) return;
  cuda::norm_rope_and_store(q_in, q_norm, k_norm, eps, weight_offset, q, k, v, positions.host,
                            positions.device != nullptr ? positions.device->data<int32_t>() : nullptr, table, cache_k, cache_v);
}

void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, const RopeTable& table, std::span<const RopeStoreRows> seqs) {
  constexpr const char* kOp = "rope_and_store";
  detail::require_defined(kOp, "q", q);
  detail::require_defined(kOp, "k", k);
  SANCTUM_REQUIRE(q.ndim() == 3 && k.ndim() == 3, kOp, "q " + q.shape_string() + " and k " + k.shape_string() + " must be 3-D");
  for (const RopeStoreRows& s : seqs) {  // every sequence's checks before anything is written
    SANCTUM_REQUIRE(0 <= s.begin && s.begin <= s.end && s.end <= q.dim(0), kOp, "a sequence's rows are outside the batch's");
    check_rope_and_store(kOp, rows_of(q, s), rows_of(k, s), rows_of(v, s), s.positions, table, s.cache_k, s.cache_v);
  }
  if (one_launch(q, seqs)) return cuda::rope_and_store_batch(q, k, v, table, device_sequences(seqs));
  for (const RopeStoreRows& s : seqs) {
    Tensor qs = rows_of(q, s), ks = rows_of(k, s), ck = s.cache_k, cv = s.cache_v;
    rope_and_store(qs, ks, rows_of(v, s), s.positions, table, ck, cv);
  }
}

void norm_rope_and_store(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                         Tensor& k, const Tensor& v, const RopeTable& table, std::span<const RopeStoreRows> seqs) {
  constexpr const char* kOp = "norm_rope_and_store";
  check_norms(kOp, q_in, q_norm, k_norm, eps, q, k);
  const int64_t heads = q.dim(1);
  bool fused = true;  // every sequence's own call would be the one fused launch
  for (const RopeStoreRows& s : seqs) {
    SANCTUM_REQUIRE(0 <= s.begin && s.begin <= s.end && s.end <= q.dim(0), kOp, "a sequence's rows are outside the batch's");
    const Tensor qs = rows_of(q, s), ks = rows_of(k, s), q_in_s = q_in.slice(0, s.begin * heads, s.end * heads);
    check_rope_and_store(kOp, qs, ks, rows_of(v, s), s.positions, table, s.cache_k, s.cache_v);
    fused = fused && q.device() == Device::cuda && cuda::norm_rope_and_store_fused(q_in_s, qs, ks);
  }
  detail::require_one_device(kOp, {{"q_in", &q_in}, {"q_norm", &q_norm}, {"k_norm", &k_norm}, {"q", &q}});
  if (fused && one_launch(q, seqs))
    return cuda::norm_rope_and_store_batch(q_in, q_norm, k_norm, eps, weight_offset, q, k, v, table, device_sequences(seqs));
  for (const RopeStoreRows& s : seqs) {
    Tensor qs = rows_of(q, s), ks = rows_of(k, s), ck = s.cache_k, cv = s.cache_v;
    norm_rope_and_store(q_in.slice(0, s.begin * heads, s.end * heads), q_norm, k_norm, eps, weight_offset, qs, ks, rows_of(v, s),
                        s.positions, table, ck, cv);
  }
}

}  // namespace sanctum::ops

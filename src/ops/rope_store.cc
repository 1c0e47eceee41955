#include "ops/rope_store.h"

#include "ops/cuda/kernels.h"
#include "ops/elementwise.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, Tensor& cache_k,
                    Tensor& cache_v) {
  constexpr const char* kOp = "rope_and_store";
  detail::require_defined(kOp, "q", q);
  detail::require_defined(kOp, "k", k);
  SANCTUM_REQUIRE(k.ndim() == 3, kOp, "k must be 3-D (tokens, heads, head_dim), got " + k.shape_string());
  const Device device = detail::require_one_device(kOp, {{"q", &q}, {"k", &k}, {"v", &v}, {"cache_k", &cache_k}, {"cache_v", &cache_v}});
  if (device != Device::cuda || k.dim(0) == 0) {  // the ops it stands for, which check everything
    rope(q, positions, table);
    rope(k, positions, table);
    store_rows(k.reshape({k.dim(0), k.dim(1) * k.dim(2)}), cache_k, positions);
    return store_rows(v, cache_v, positions);
  }
  // Every check of the four ops, before anything runs.
  Tensor k_rows = k.reshape({k.dim(0), k.dim(1) * k.dim(2)});
  SANCTUM_REQUIRE(q.ndim() == 3 && q.dim(0) == k.dim(0) && q.dim(2) == k.dim(2), kOp,
                  "q " + q.shape_string() + " and k " + k.shape_string() + " must share tokens and head_dim");
  for (const auto& [name, t] : {detail::Named{"q", &q}, detail::Named{"k", &k}, detail::Named{"v", &v}, detail::Named{"cache_k", &cache_k},
                                detail::Named{"cache_v", &cache_v}}) {
    detail::require_dtype(kOp, name, *t, DType::f32);
    detail::require_inner_contiguous(kOp, name, *t);
  }
  SANCTUM_REQUIRE(table.rotary_dim() > 0 && table.rotary_dim() <= q.dim(2), kOp,
                  "rotary_dim " + std::to_string(table.rotary_dim()) + " does not fit head_dim " + std::to_string(q.dim(2)));
  SANCTUM_REQUIRE(v.ndim() == 2 && v.dim(0) == k.dim(0) && v.dim(1) == k_rows.dim(1) && cache_k.ndim() == 2 && cache_v.ndim() == 2 &&
                      cache_k.dim(1) == k_rows.dim(1) && cache_v.dim(1) == v.dim(1) && cache_k.dim(0) == cache_v.dim(0),
                  kOp, "v " + v.shape_string() + ", cache_k " + cache_k.shape_string() + " and cache_v " + cache_v.shape_string() +
                           " do not fit k " + k.shape_string());
  const int64_t n = k.dim(0), first = positions.first();
  SANCTUM_REQUIRE(positions.size() == n, kOp, std::to_string(positions.size()) + " positions for " + std::to_string(n) + " tokens");
  SANCTUM_REQUIRE(first >= 0 && first + n <= cache_k.dim(0), kOp,
                  "rows [" + std::to_string(first) + ", " + std::to_string(first + n) + ") are outside the cache " + cache_k.shape_string());
  if (positions.device != nullptr) detail::require_device_positions(kOp, positions, device);
  cuda::rope_and_store(q, k, v, positions.host, positions.device != nullptr ? positions.device->data<int32_t>() : nullptr, table, cache_k,
                       cache_v);
}

}  // namespace sanctum::ops

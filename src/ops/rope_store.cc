#include "ops/rope_store.h"

#include "ops/cuda/kernels.h"
#include "ops/elementwise.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, const Positions& positions, const RopeTable& table, Tensor& cache_k,
                    Tensor& cache_v) {
  constexpr const char* kOp = "rope_and_store";
  detail::require_defined(kOp, "k", k);
  SANCTUM_REQUIRE(k.ndim() == 3, kOp, "k must be 3-D (tokens, heads, head_dim), got " + k.shape_string());
  const Tensor k_rows = k.reshape({k.dim(0), k.dim(1) * k.dim(2)});  // each token's heads contiguous
  // The checks of the four ops it stands for, before anything runs.
  const Device device = check_rope(q, positions.host.size(), table);
  check_rope(k, positions.host.size(), table);
  check_store_rows(k_rows, cache_k, positions);
  check_store_rows(v, cache_v, positions);
  detail::require_one_device(kOp, {{"q", &q}, {"k", &k}, {"v", &v}, {"cache_k", &cache_k}, {"cache_v", &cache_v}});
  if (device != Device::cuda) {
    rope(q, positions, table);
    rope(k, positions, table);
    store_rows(k_rows, cache_k, positions);
    return store_rows(v, cache_v, positions);
  }
  // The one launch reads q and k as heads of one head_dim, and v's rows as k's width.
  SANCTUM_REQUIRE(q.dim(2) == k.dim(2) && v.dim(1) == k_rows.dim(1), kOp,
                  "q " + q.shape_string() + ", k " + k.shape_string() + " and v " + v.shape_string() + " must share head_dim and k's width");
  if (k.dim(0) == 0) return;
  cuda::rope_and_store(q, k, v, positions.host, positions.device != nullptr ? positions.device->data<int32_t>() : nullptr, table, cache_k,
                       cache_v);
}

}  // namespace sanctum::ops

#include "ops/attention.h"

#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, float scale, Tensor& out) {
  constexpr const char* kOp = "attention";
  detail::require_defined(kOp, "q", q);
  detail::require_defined(kOp, "k", k);
  detail::require_defined(kOp, "v", v);
  detail::require_defined(kOp, "out", out);
  const Device device = detail::require_one_device(kOp, {{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}});
  for (const auto& [name, t] : {detail::Named{"q", &q}, detail::Named{"k", &k}, detail::Named{"v", &v}, detail::Named{"out", &out}}) {
    detail::require_dtype(kOp, name, *t, DType::f32);
    SANCTUM_REQUIRE(t->ndim() == 3, kOp, std::string(name) + " must be 3-D (tokens, heads, head_dim), got " + t->shape_string());
    detail::require_inner_contiguous(kOp, name, *t);
  }
  SANCTUM_REQUIRE(detail::same_shape(q, out), kOp, "out " + out.shape_string() + " must match q " + q.shape_string());
  SANCTUM_REQUIRE(detail::same_shape(k, v), kOp, "k " + k.shape_string() + " and v " + v.shape_string() + " must have one shape");
  SANCTUM_REQUIRE(k.dim(2) == q.dim(2), kOp,
                  "head_dim differs: q has " + std::to_string(q.dim(2)) + ", k has " + std::to_string(k.dim(2)));
  SANCTUM_REQUIRE(k.dim(1) > 0 && q.dim(1) % k.dim(1) == 0, kOp,
                  "n_heads " + std::to_string(q.dim(1)) + " is not a multiple of n_kv_heads " + std::to_string(k.dim(1)));
  SANCTUM_REQUIRE(q_pos0 >= 0 && k.dim(0) >= q_pos0 + q.dim(0), kOp,
                  "the cache holds " + std::to_string(k.dim(0)) + " rows, queries need " + std::to_string(q_pos0 + q.dim(0)) +
                      " (q_pos0 " + std::to_string(q_pos0) + " + " + std::to_string(q.dim(0)) + " queries)");
  if (q.dim(0) == 0 || q.dim(1) == 0) return;
  if (device == Device::cuda) return cuda::attention(q, k, v, q_pos0, scale, out);
  cpu::attention(q, k, v, q_pos0, scale, out);
}

}  // namespace sanctum::ops

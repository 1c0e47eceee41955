#include "ops/full_attention.h"

#include "ops/cpu/encoder_kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void full_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out) {
  constexpr const char* kOp = "full_attention";
  for (const auto& [name, t] : {detail::Named{"q", &q}, detail::Named{"k", &k}, detail::Named{"v", &v}, detail::Named{"out", &out}})
    detail::require_defined(kOp, name, *t);
  const Device device = detail::require_one_device(kOp, {{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}});
  for (const auto& [name, t] : {detail::Named{"q", &q}, detail::Named{"k", &k}, detail::Named{"v", &v}, detail::Named{"out", &out}}) {
    detail::require_dtype(kOp, name, *t, DType::f32);
    SANCTUM_REQUIRE(t->ndim() == 3, kOp, std::string(name) + " must be 3-D (tokens, heads, head_dim), got " + t->shape_string());
    detail::require_inner_contiguous(kOp, name, *t);
  }
  SANCTUM_REQUIRE(detail::same_shape(q, out), kOp, "out " + out.shape_string() + " must match q " + q.shape_string());
  SANCTUM_REQUIRE(detail::same_shape(k, v), kOp, "k " + k.shape_string() + " and v " + v.shape_string() + " must have one shape");
  SANCTUM_REQUIRE(k.dim(2) == q.dim(2), kOp, "head_dim differs: q has " + std::to_string(q.dim(2)) + ", k has " + std::to_string(k.dim(2)));
  SANCTUM_REQUIRE(k.dim(1) > 0 && q.dim(1) % k.dim(1) == 0, kOp,
                  "n_heads " + std::to_string(q.dim(1)) + " is not a multiple of n_kv_heads " + std::to_string(k.dim(1)));
  SANCTUM_REQUIRE(k.dim(0) > 0 || q.dim(0) == 0, kOp, "queries need at least one key");
  if (q.dim(0) == 0 || q.dim(1) == 0) return;
  if (device == Device::cuda) return cuda::full_attention(q, k, v, scale, out);
  cpu::full_attention(q, k, v, scale, out);
}

}  // namespace sanctum::ops

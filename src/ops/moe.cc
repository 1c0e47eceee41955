#include "ops/moe.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

namespace {
void require_rows(const char* op, const char* name, const Tensor& t) {
  detail::require_defined(op, name, t);
  detail::require_dtype(op, name, t, DType::f32);
  SANCTUM_REQUIRE(t.ndim() == 2, op, std::string(name) + " must be 2-D, got " + t.shape_string());
  detail::require_inner_contiguous(op, name, t);
}
}  // namespace

void copy_rows(const Tensor& src, std::span<const int32_t> src_rows, Tensor& dst, std::span<const int32_t> dst_rows) {
  constexpr const char* kOp = "copy_rows";
  require_rows(kOp, "src", src);
  require_rows(kOp, "dst", dst);
  const Device device = detail::require_one_device(kOp, {{"src", &src}, {"dst", &dst}});
  SANCTUM_REQUIRE(src.dim(1) == dst.dim(1), kOp, "src " + src.shape_string() + " and dst " + dst.shape_string() + " differ in width");
  SANCTUM_REQUIRE(src_rows.size() == dst_rows.size(), kOp, "src_rows and dst_rows differ in length");
  for (size_t i = 0; i < src_rows.size(); ++i)
    SANCTUM_REQUIRE(src_rows[i] >= 0 && src_rows[i] < src.dim(0) && dst_rows[i] >= 0 && dst_rows[i] < dst.dim(0), kOp,
                    "row index out of range at " + std::to_string(i));
  if (src_rows.empty() || src.dim(1) == 0) return;
  if (device == Device::cuda) return cuda::copy_rows(src, src_rows, dst, dst_rows);
  const size_t bytes = static_cast<size_t>(src.dim(1)) * sizeof(float);
  for (size_t i = 0; i < src_rows.size(); ++i)
    std::memcpy(dst.data<float>() + dst_rows[i] * dst.stride(0), src.data<float>() + src_rows[i] * src.stride(0), bytes);
}

void moe_combine(const Tensor& per_rank, std::span<const float> weights, const Tensor* shared, std::span<const float> shared_weights,
                 Tensor& out) {
  constexpr const char* kOp = "moe_combine";
  require_rows(kOp, "per_rank", per_rank);
  require_rows(kOp, "out", out);
  if (shared) require_rows(kOp, "shared", *shared);
  const Tensor none;
  const Device device = detail::require_one_device(kOp, {{"per_rank", &per_rank}, {"out", &out}, {"shared", shared ? shared : &none}});
  const int64_t n = out.dim(0), d = out.dim(1);
  SANCTUM_REQUIRE(n > 0 ? per_rank.dim(0) % n == 0 : per_rank.dim(0) == 0, kOp, "per_rank rows must be n * k");
  const int64_t k = n > 0 ? per_rank.dim(0) / n : 0;
  SANCTUM_REQUIRE(per_rank.dim(1) == d && static_cast<int64_t>(weights.size()) == n * k, kOp,
                  "per_rank " + per_rank.shape_string() + " and " + std::to_string(weights.size()) + " weights do not fit out " +
                      out.shape_string());
  if (shared)
    SANCTUM_REQUIRE(shared->dim(0) == n && shared->dim(1) == d && static_cast<int64_t>(shared_weights.size()) == n, kOp,
                    "shared " + shared->shape_string() + " with " + std::to_string(shared_weights.size()) + " weights does not fit out " +
                        out.shape_string());
  if (n == 0 || d == 0) return;
  if (device == Device::cuda) return cuda::moe_combine(per_rank, weights, shared, shared_weights, out);
  for (int64_t t = 0; t < n; ++t) {
    float* o = out.data<float>() + t * out.stride(0);
    std::fill(o, o + d, 0.0f);
    for (int64_t r = 0; r < k; ++r) {
      const float w = weights[static_cast<size_t>(t * k + r)];
      const float* y = per_rank.data<float>() + (t * k + r) * per_rank.stride(0);
      for (int64_t j = 0; j < d; ++j) o[j] += w * y[j];
    }
    if (shared) {
      const float g = shared_weights[static_cast<size_t>(t)];
      const float* s = shared->data<float>() + t * shared->stride(0);
      for (int64_t j = 0; j < d; ++j) o[j] += g * s[j];
    }
  }
}

}  // namespace sanctum::ops

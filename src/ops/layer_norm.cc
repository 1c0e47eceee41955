#include "ops/layer_norm.h"

#include "ops/cpu/encoder_kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) {
  constexpr const char* kOp = "layer_norm";
  detail::require_defined(kOp, "x", x);
  detail::require_defined(kOp, "weight", weight);
  detail::require_defined(kOp, "bias", bias);
  detail::require_defined(kOp, "out", out);
  const Device device = detail::require_one_device(kOp, {{"x", &x}, {"weight", &weight}, {"bias", &bias}, {"out", &out}});
  detail::require_dtype(kOp, "x", x, DType::f32);
  detail::require_dtype(kOp, "out", out, DType::f32);
  detail::require_float(kOp, "weight", weight);
  detail::require_float(kOp, "bias", bias);
  detail::require_inner_contiguous(kOp, "x", x);
  detail::require_inner_contiguous(kOp, "out", out);
  SANCTUM_REQUIRE(detail::same_shape(x, out), kOp, "out " + out.shape_string() + " must match x " + x.shape_string());
  SANCTUM_REQUIRE(weight.ndim() == 1 && weight.dim(0) == x.dim(-1) && bias.ndim() == 1 && bias.dim(0) == x.dim(-1), kOp,
                  "weight " + weight.shape_string() + " and bias " + bias.shape_string() + " must be (" + std::to_string(x.dim(-1)) + ")");
  if (device == Device::cuda) {
    detail::require_inner_contiguous(kOp, "weight", weight);
    detail::require_inner_contiguous(kOp, "bias", bias);
    return cuda::layer_norm(x, weight, bias, eps, out);
  }
  cpu::layer_norm(x, weight, bias, eps, out);
}

}  // namespace sanctum::ops

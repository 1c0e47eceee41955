#include "ops/gelu.h"

#include "ops/cpu/encoder_kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void gelu(const Tensor& x, Tensor& out, GeluKind kind) {
  constexpr const char* kOp = "gelu";
  detail::require_defined(kOp, "x", x);
  detail::require_defined(kOp, "out", out);
  const Device device = detail::require_one_device(kOp, {{"x", &x}, {"out", &out}});
  detail::require_dtype(kOp, "x", x, DType::f32);
  detail::require_dtype(kOp, "out", out, DType::f32);
  detail::require_inner_contiguous(kOp, "x", x);
  detail::require_inner_contiguous(kOp, "out", out);
  SANCTUM_REQUIRE(detail::same_shape(x, out), kOp, "out " + out.shape_string() + " must match x " + x.shape_string());
  if (device == Device::cuda) return cuda::gelu(x, out, kind);
  cpu::gelu(x, out, kind);
}

}  // namespace sanctum::ops

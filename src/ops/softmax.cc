#include "ops/softmax.h"

#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void softmax(Tensor& x) {
  constexpr const char* kOp = "softmax";
  detail::require_defined(kOp, "x", x);
  const Device device = detail::require_one_device(kOp, {{"x", &x}});
  detail::require_dtype(kOp, "x", x, DType::f32);
  SANCTUM_REQUIRE(x.ndim() >= 1, kOp, "x must have at least one dim");
  detail::require_inner_contiguous(kOp, "x", x);
  if (x.dim(-1) == 0) return;
  if (device == Device::cuda) return cuda::softmax(x);
  cpu::softmax(x);
}

}  // namespace sanctum::ops

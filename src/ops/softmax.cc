#include "ops/softmax.h"

#include "ops/cpu/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void softmax(Tensor& x) {
  constexpr const char* kOp = "softmax";
  detail::require_defined(kOp, "x", x);
  detail::require_cpu(kOp, {{"x", &x}});
  detail::require_dtype(kOp, "x", x, DType::f32);
  detail::require(x.ndim() >= 1, kOp, "x must have at least one dim");
  detail::require_inner_contiguous(kOp, "x", x);
  if (x.dim(-1) == 0) return;
  cpu::softmax(x);
}

}  // namespace sanctum::ops

#include "ops/matmul.h"

#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"
#include "ops/precision.h"

namespace sanctum::ops {

namespace {
constexpr const char* kOp = "matmul";

void check_weight_layout(const Weight& w) {
  detail::require_weight(kOp, w);
  detail::require_inner_contiguous(kOp, "weight data", w.data);
  if (w.quantized()) {
    detail::require_inner_contiguous(kOp, "weight scales", w.scales);
    detail::require_inner_contiguous(kOp, "weight biases", w.biases);
  }
}
}  // namespace

void matmul(const Tensor& x, const Weight& w, Tensor& y) {
  detail::require_defined(kOp, "x", x);
  detail::require_defined(kOp, "y", y);
  const Device device = detail::require_one_device(kOp, {{"x", &x}, {"y", &y}, {"weight", &w.data}});
  check_weight_layout(w);
  detail::require_dtype(kOp, "x", x, DType::f32);
  detail::require_dtype(kOp, "y", y, DType::f32);
  SANCTUM_REQUIRE(x.ndim() == 2 && y.ndim() == 2, kOp, "x and y must be 2-D (n, k) and (n, m), got x " +
                                                           x.shape_string() + ", y " + y.shape_string());
  SANCTUM_REQUIRE(x.dim(1) == w.cols, kOp, "x rows have " + std::to_string(x.dim(1)) + " elements, weight '" + w.name +
                                               "' has " + std::to_string(w.cols) + " in-features");
  SANCTUM_REQUIRE(y.dim(0) == x.dim(0) && y.dim(1) == w.rows, kOp,
                  "y must be (" + std::to_string(x.dim(0)) + ", " + std::to_string(w.rows) + "), got " + y.shape_string());
  detail::require_inner_contiguous(kOp, "x", x);
  detail::require_inner_contiguous(kOp, "y", y);
  SANCTUM_REQUIRE(x.raw() != y.raw(), kOp, "y must not alias x");
  if (x.dim(0) == 0 || w.rows == 0) return;
  if (device == Device::cuda) return cuda::matmul(x, w, y);
  if (w.quantized() && matmul_precision() == MatmulPrecision::int8)
    cpu::matmul_quantized_int8(x, w, y);
  else if (w.quantized())
    cpu::matmul_quantized(x, w, y);
  else
    cpu::matmul_dense(x, w, y);
}

void prepare_weight(Weight& w) {
  check_weight_layout(w);
  if (w.data.device() == Device::cpu) cpu::prepare_weight(w);
}

}  // namespace sanctum::ops

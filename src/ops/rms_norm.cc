#include "ops/rms_norm.h"

#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/elementwise.h"
#include "ops/op_util.h"

namespace sanctum::ops {

namespace {
Device check_rms_norm(const char* kOp, const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  detail::require_defined(kOp, "x", x);
  detail::require_defined(kOp, "weight", weight);
  detail::require_defined(kOp, "out", out);
  const Device device = detail::require_one_device(kOp, {{"x", &x}, {"weight", &weight}, {"out", &out}});
  detail::require_dtype(kOp, "x", x, DType::f32);
  // On the GPU out may be bf16: the input of matmuls that take it so (matmul_input_dtype).
  if (device != Device::cuda || out.dtype() != DType::bf16) detail::require_dtype(kOp, "out", out, DType::f32);
  detail::require_float(kOp, "weight", weight);
  SANCTUM_REQUIRE(x.ndim() >= 1, kOp, "x must have at least one dim");
  SANCTUM_REQUIRE(detail::same_shape(x, out), kOp, "out " + out.shape_string() + " must match x " + x.shape_string());
  SANCTUM_REQUIRE(weight.ndim() == 1 && weight.dim(0) == x.dim(-1), kOp,
                  "weight has " + std::to_string(weight.numel()) + " elements, x rows have " + std::to_string(x.dim(-1)));
  detail::require_inner_contiguous(kOp, "x", x);
  detail::require_inner_contiguous(kOp, "out", out);
  detail::require_inner_contiguous(kOp, "weight", weight);
  SANCTUM_REQUIRE(eps >= 0.0f, kOp, "eps must be >= 0");
  return device;
}
}  // namespace

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, float weight_offset) {
  const Device device = check_rms_norm("rms_norm", x, weight, eps, out);
  if (device == Device::cuda) return cuda::rms_norm(x, weight, eps, out, weight_offset);
  cpu::rms_norm(x, weight, eps, out, weight_offset);
}

void add_rms_norm(Tensor& h, const Tensor& delta, const Tensor& weight, float eps, Tensor& out, float weight_offset) {
  constexpr const char* kOp = "add_rms_norm";
  detail::require_defined(kOp, "h", h);
  detail::require_defined(kOp, "delta", delta);
  const Device device = detail::require_one_device(kOp, {{"h", &h}, {"delta", &delta}});
  // On the GPU delta may be bf16: a prompt GEMM's output (matmul_output_dtype).
  if (device != Device::cuda || delta.dtype() != DType::bf16) detail::require_dtype(kOp, "delta", delta, DType::f32);
  SANCTUM_REQUIRE(h.ndim() == 2 && detail::same_shape(h, delta), kOp,
                  "h " + h.shape_string() + " and delta " + delta.shape_string() + " must be one 2-D shape");
  detail::require_inner_contiguous(kOp, "delta", delta);
  if (device != Device::cuda) {  // the CPU kernels stream each row twice either way
    add(h, delta, h);
    return rms_norm(h, weight, eps, out, weight_offset);
  }
  check_rms_norm(kOp, h, weight, eps, out);
  cuda::add_rms_norm(h, delta, weight, eps, out, weight_offset);
}

}  // namespace sanctum::ops

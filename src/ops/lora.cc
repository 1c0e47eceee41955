#include "ops/lora.h"

#include "ops/cpu/lora.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void lora_add(const Tensor& x, const Tensor& a, const Tensor& b, float scale, Tensor& y) {
  constexpr const char* kOp = "lora_add";
  for (const auto& [name, t] : {detail::Named{"x", &x}, {"a", &a}, {"b", &b}, {"y", &y}}) detail::require_defined(kOp, name, *t);
  const Device device = detail::require_one_device(kOp, {{"x", &x}, {"a", &a}, {"b", &b}, {"y", &y}});
  SANCTUM_REQUIRE(device == Device::cpu, kOp,
                  "unmerged adapters run on the CPU only: serve --lora with --device cpu, or merge the adapter at load with --adapter",
                  ErrorKind::unsupported);
  SANCTUM_REQUIRE(x.dtype() == DType::f32 || x.dtype() == DType::bf16, kOp, "x must be f32 or bf16, got " + x.shape_string(),
                  ErrorKind::unsupported);
  detail::require_dtype(kOp, "a", a, DType::f32);
  detail::require_dtype(kOp, "b", b, DType::f32);
  detail::require_dtype(kOp, "y", y, DType::f32);
  SANCTUM_REQUIRE(x.ndim() == 2 && a.ndim() == 2 && b.ndim() == 2 && y.ndim() == 2, kOp,
                  "x, a, b and y must be 2-D, got " + x.shape_string() + ", " + a.shape_string() + ", " + b.shape_string() + ", " +
                      y.shape_string());
  SANCTUM_REQUIRE(a.dim(1) == x.dim(1) && b.dim(1) == a.dim(0) && y.dim(0) == x.dim(0) && y.dim(1) == b.dim(0), kOp,
                  "shapes disagree: x " + x.shape_string() + ", a " + a.shape_string() + " (rank, in), b " + b.shape_string() +
                      " (out, rank), y " + y.shape_string());
  for (const auto& [name, t] : {detail::Named{"x", &x}, {"a", &a}, {"b", &b}, {"y", &y}}) detail::require_inner_contiguous(kOp, name, *t);
  SANCTUM_REQUIRE(a.is_contiguous() && b.is_contiguous(), kOp, "a and b must be contiguous");
  cpu::lora_add(x, a, b, scale, y);
}

}  // namespace sanctum::ops

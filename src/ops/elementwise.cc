#include "ops/elementwise.h"

#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  constexpr const char* kOp = "add";
  detail::require_defined(kOp, "a", a);
  detail::require_defined(kOp, "b", b);
  detail::require_defined(kOp, "out", out);
  const Device device = detail::require_one_device(kOp, {{"a", &a}, {"b", &b}, {"out", &out}});
  for (const auto& [name, t] : {detail::Named{"a", &a}, detail::Named{"b", &b}, detail::Named{"out", &out}}) {
    detail::require_dtype(kOp, name, *t, DType::f32);
    SANCTUM_REQUIRE(t->ndim() >= 1, kOp, std::string(name) + " must have at least one dim");
    detail::require_inner_contiguous(kOp, name, *t);
  }
  SANCTUM_REQUIRE(detail::same_shape(a, b) && detail::same_shape(a, out), kOp,
                  "a " + a.shape_string() + ", b " + b.shape_string() + " and out " + out.shape_string() + " must have one shape");
  if (device == Device::cuda) return cuda::add(a, b, out);
  cpu::add(a, b, out);
}

void add_bias(Tensor& y, const Tensor& bias) {
  constexpr const char* kOp = "add_bias";
  detail::require_defined(kOp, "y", y);
  detail::require_defined(kOp, "bias", bias);
  const Device device = detail::require_one_device(kOp, {{"y", &y}, {"bias", &bias}});
  detail::require_dtype(kOp, "y", y, DType::f32);
  detail::require_float(kOp, "bias", bias);
  SANCTUM_REQUIRE(y.ndim() >= 1, kOp, "y must have at least one dim");
  SANCTUM_REQUIRE(bias.ndim() == 1 && bias.dim(0) == y.dim(-1), kOp,
                  "bias has " + std::to_string(bias.numel()) + " elements, y rows have " + std::to_string(y.dim(-1)));
  detail::require_inner_contiguous(kOp, "y", y);
  detail::require_inner_contiguous(kOp, "bias", bias);
  if (device == Device::cuda) return cuda::add_bias(y, bias);
  cpu::add_bias(y, bias);
}

void copy(const Tensor& src, Tensor& dst) {
  constexpr const char* kOp = "copy";
  detail::require_defined(kOp, "src", src);
  detail::require_defined(kOp, "dst", dst);
  const Device device = detail::require_one_device(kOp, {{"src", &src}, {"dst", &dst}});
  SANCTUM_REQUIRE(src.dtype() == dst.dtype(), kOp, "src " + src.shape_string() + " and dst " + dst.shape_string() + " differ in dtype",
                  ErrorKind::unsupported);
  SANCTUM_REQUIRE(detail::same_shape(src, dst), kOp, "src " + src.shape_string() + " and dst " + dst.shape_string() + " differ in shape");
  if (device == Device::cuda) return cuda::copy(src, dst);
  cpu::copy(src, dst);
}

Device check_store_rows(const Tensor& src, const Tensor& dst, const Positions& positions) {
  constexpr const char* kOp = "store_rows";
  detail::require_defined(kOp, "src", src);
  detail::require_defined(kOp, "dst", dst);
  const Device device = detail::require_one_device(kOp, {{"src", &src}, {"dst", &dst}});
  detail::require_dtype(kOp, "src", src, DType::f32);
  // A GPU's bf16 KV cache rows too (ops/kv_cache_ops.h): rounded as the CPU's store rounds them.
  if (device != Device::cuda || dst.dtype() != DType::bf16) detail::require_dtype(kOp, "dst", dst, DType::f32);
  SANCTUM_REQUIRE(src.ndim() == 2 && dst.ndim() == 2 && src.dim(1) == dst.dim(1), kOp,
                  "src " + src.shape_string() + " and dst " + dst.shape_string() + " must be 2-D with equal columns");
  detail::require_inner_contiguous(kOp, "src", src);
  detail::require_inner_contiguous(kOp, "dst", dst);
  const int64_t n = src.dim(0), first = positions.first();
  SANCTUM_REQUIRE(positions.size() == n, kOp, std::to_string(positions.size()) + " positions for " + std::to_string(n) + " rows");
  SANCTUM_REQUIRE(first >= 0 && first + n <= dst.dim(0), kOp,
                  "rows [" + std::to_string(first) + ", " + std::to_string(first + n) + ") are outside dst " + dst.shape_string());
  if (positions.device != nullptr) detail::require_device_positions(kOp, positions, device);
  return device;
}

void store_rows(const Tensor& src, Tensor& dst, const Positions& positions) {
  const Device device = check_store_rows(src, dst, positions);
  const int64_t n = src.dim(0), first = positions.first();
  if (n == 0) return;
  if (device == Device::cuda) {
    return cuda::store_rows(src, dst, first, positions.device != nullptr ? positions.device->data<int32_t>() : nullptr);
  }
  const int64_t row0 = positions.device != nullptr ? positions.device->data<int32_t>()[0] : first;
  Tensor target = dst.slice(0, row0, row0 + n);
  cpu::copy(src, target);
}

}  // namespace sanctum::ops

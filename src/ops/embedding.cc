#include "ops/embedding.h"

#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

namespace {
constexpr const char* kOp = "embedding";

Device check_embedding(const Weight& table, int64_t n, const Tensor& out) {
  detail::require_defined(kOp, "out", out);
  const Device device = detail::require_one_device(kOp, {{"out", &out}, {"table", &table.data}});
  detail::require_weight(kOp, table);
  detail::require_inner_contiguous(kOp, "table", table.data);
  detail::require_dtype(kOp, "out", out, DType::f32);
  SANCTUM_REQUIRE(out.ndim() == 2 && out.dim(0) == n && out.dim(1) == table.cols, kOp,
                  "out must be (" + std::to_string(n) + ", " + std::to_string(table.cols) + "), got " + out.shape_string());
  detail::require_inner_contiguous(kOp, "out", out);
  return device;
}
}  // namespace

void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) {
  const Device device = check_embedding(table, static_cast<int64_t>(ids.size()), out);
  for (size_t i = 0; i < ids.size(); ++i)
    SANCTUM_REQUIRE(ids[i] >= 0 && ids[i] < table.rows, kOp,
                    "token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) + " is outside the vocabulary [0, " +
                        std::to_string(table.rows) + ")");
  if (device == Device::cuda) return cuda::embedding(table, ids, nullptr, out);
  cpu::embedding(table, ids, out);
}

void embedding(const Weight& table, const Tensor& ids, Tensor& out) {
  detail::require_defined(kOp, "ids", ids);
  detail::require_dtype(kOp, "ids", ids, DType::i32);
  SANCTUM_REQUIRE(ids.ndim() == 1 && ids.is_contiguous(), kOp, "ids must be a contiguous 1-D i32 tensor, got " + ids.shape_string());
  const Device device = check_embedding(table, ids.dim(0), out);
  SANCTUM_REQUIRE(ids.device() == device, kOp, "ids live on another device than the table");
  if (device == Device::cuda) return cuda::embedding(table, {}, ids.data<int32_t>(), out);
  embedding(table, std::span<const int32_t>(ids.data<int32_t>(), static_cast<size_t>(ids.dim(0))), out);
}

}  // namespace sanctum::ops

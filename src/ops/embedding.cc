#include "ops/embedding.h"

#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) {
  constexpr const char* kOp = "embedding";
  detail::require_defined(kOp, "out", out);
  const Device device = detail::require_one_device(kOp, {{"out", &out}, {"table", &table.data}});
  detail::require_weight(kOp, table);
  detail::require_inner_contiguous(kOp, "table", table.data);
  detail::require_dtype(kOp, "out", out, DType::f32);
  SANCTUM_REQUIRE(out.ndim() == 2 && out.dim(0) == static_cast<int64_t>(ids.size()) && out.dim(1) == table.cols, kOp,
                  "out must be (" + std::to_string(ids.size()) + ", " + std::to_string(table.cols) + "), got " +
                      out.shape_string());
  detail::require_inner_contiguous(kOp, "out", out);
  for (size_t i = 0; i < ids.size(); ++i)
    SANCTUM_REQUIRE(ids[i] >= 0 && ids[i] < table.rows, kOp,
                    "token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) + " is outside the vocabulary [0, " +
                        std::to_string(table.rows) + ")");
  if (device == Device::cuda) return cuda::embedding(table, ids, out);
  cpu::embedding(table, ids, out);
}

}  // namespace sanctum::ops

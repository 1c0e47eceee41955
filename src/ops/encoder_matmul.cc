#include "ops/encoder_matmul.h"

#include "ops/cpu/gemm_f32.h"
#include "ops/cuda/kernels.h"
#include "ops/matmul.h"
#include "ops/op_util.h"
#include "ops/precision.h"

namespace sanctum::ops {

void encoder_matmul(const Tensor& x, const Weight& w, Tensor& y) {
  constexpr const char* kOp = "encoder_matmul";
  detail::require_defined(kOp, "x", x);
  detail::require_defined(kOp, "y", y);
  const Device device = detail::require_one_device(kOp, {{"x", &x}, {"y", &y}, {"weight", &w.data}});
  // On the GPU in the f32 precision mode: one f32 GEMM (cuBLAS, no TF32) rather than matmul's
  // eight-row mat-vecs; in the other modes matmul's bf16 tensor-core GEMM.
  const bool gpu_f32 = device == Device::cuda && matmul_precision() == MatmulPrecision::f32 && w.layout == WeightLayout::rows;
  if (!gpu_f32 && (device != Device::cpu || w.quantized() || w.layout != WeightLayout::rows)) return matmul(x, w, y);
  detail::require_weight(kOp, w);
  detail::require_dtype(kOp, "x", x, DType::f32);
  detail::require_dtype(kOp, "y", y, DType::f32);
  SANCTUM_REQUIRE(x.ndim() == 2 && x.dim(1) == w.cols, kOp,
                  "x must be (tokens, " + std::to_string(w.cols) + ") for weight '" + w.name + "', got " + x.shape_string());
  SANCTUM_REQUIRE(y.ndim() == 2 && y.dim(0) == x.dim(0) && y.dim(1) == w.rows, kOp,
                  "y must be (" + std::to_string(x.dim(0)) + ", " + std::to_string(w.rows) + "), got " + y.shape_string());
  detail::require_inner_contiguous(kOp, "x", x);
  detail::require_inner_contiguous(kOp, "y", y);
  detail::require_inner_contiguous(kOp, "weight", w.data);
  if (gpu_f32) return cuda::encoder_matmul_f32(x, w, y);
  // The weight's rows are the columns of wᵀ.
  const cpu::GemmB b{w.data.raw(), w.data.dtype(), w.data.stride(0), true};
  cpu::gemm_f32(x.dim(0), w.rows, w.cols, x.data<const float>(), x.stride(0), b, y.data<float>(), y.stride(0));
}

}  // namespace sanctum::ops

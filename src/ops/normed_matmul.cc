#include "ops/normed_matmul.h"

#include "ops/cuda/kernels.h"
#include "ops/cuda/matvec_tiles.h"
#include "ops/op_util.h"
#include "ops/precision.h"

namespace sanctum::ops {

namespace {

bool fast_gpu(const Weight& w) { return w.data && w.data.device() == Device::cuda && matmul_precision() != MatmulPrecision::f32; }

// y: (1, cols) f32 on the GPU, rows inner contiguous.
void check_row(const char* op, const char* name, const Tensor& y, int64_t cols) {
  detail::require_defined(op, name, y);
  detail::require_dtype(op, name, y, DType::f32);
  SANCTUM_REQUIRE(y.ndim() == 2 && y.dim(0) == 1 && y.dim(1) == cols, op,
                  std::string(name) + " must be (1, " + std::to_string(cols) + "), got " + y.shape_string());
  detail::require_inner_contiguous(op, name, y);
  SANCTUM_REQUIRE(y.device() == Device::cuda, op, std::string(name) + " must be on the GPU");
}

}  // namespace

bool matmul_residual_ok(const Tensor& x, const Weight& w, const ResidualNorm& r) {
  return x && x.device() == Device::cuda && x.dtype() == DType::f32 && x.ndim() == 2 && fast_gpu(w) && cuda::tiles_residual_ok(x, w, r);
}

int64_t matmul_residual(const Tensor& x, const Weight& w, const ResidualNorm& r) {
  SANCTUM_REQUIRE(matmul_residual_ok(x, w, r), "matmul_residual",
                  "no fused kernel takes weight '" + w.name + "' with x " + x.shape_string() + "; use matmul and add_rms_norm");
  return cuda::tiles_matvec_residual(x, w, r);
}

bool matmul_scaled_ok(const ScaledInput& in, const Weight& w) { return fast_gpu(w) && cuda::tiles_scaled_ok(in, w); }

void matmul_scaled(const ScaledInput& in, const Weight& w, Tensor& y) {
  constexpr const char* kOp = "matmul_scaled";
  SANCTUM_REQUIRE(matmul_scaled_ok(in, w), kOp,
                  "no fused kernel takes weight '" + w.name + "' with this input; use apply_norm_scale and matmul");
  check_row(kOp, "y", y, w.rows);
  cuda::tiles_matvec_scaled(in, w, y);
}

bool matmul_silu_mul_scaled_ok(const ScaledInput& in, const Weight& gate_up) {
  return fast_gpu(gate_up) && cuda::tiles_silu_mul_scaled_ok(in, gate_up);
}

void matmul_silu_mul_scaled(const ScaledInput& in, const Weight& gate_up, Tensor& act) {
  constexpr const char* kOp = "matmul_silu_mul_scaled";
  SANCTUM_REQUIRE(matmul_silu_mul_scaled_ok(in, gate_up), kOp,
                  "no fused kernel takes weight '" + gate_up.name + "' with this input; use apply_norm_scale and matmul_silu_mul");
  check_row(kOp, "act", act, gate_up.rows / 2);
  cuda::tiles_matvec_silu_mul_scaled(in, gate_up, act);
}

void apply_norm_scale(const ScaledInput& in, Tensor& x) {
  constexpr const char* kOp = "apply_norm_scale";
  SANCTUM_REQUIRE(in.u != nullptr && in.squares != nullptr && in.count > 0, kOp, "the input has no squares");
  const int64_t cols = in.u->dim(-1);
  check_row(kOp, "u", *in.u, cols);
  check_row(kOp, "x", x, cols);
  SANCTUM_REQUIRE(in.squares->device() == Device::cuda && in.squares->dtype() == DType::f32 && in.squares->numel() >= in.count, kOp,
                  "squares must hold " + std::to_string(in.count) + " f32 values on the GPU");
  cuda::apply_norm_scale(in, x);
}

}  // namespace sanctum::ops

#include "ops/matmul.h"

#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/matvec_tiles.h"
#include "ops/op_util.h"
#include "ops/precision.h"

namespace sanctum::ops {

namespace {
constexpr const char* kOp = "matmul";

void check_weight_layout(const char* op, const Weight& w) {
  detail::require_weight(op, w);
  detail::require_inner_contiguous(op, "weight data", w.data);
  if (w.quantized()) {
    detail::require_inner_contiguous(op, "weight scales", w.scales);
    detail::require_inner_contiguous(op, "weight biases", w.biases);
  }
}

// What a product of x (n, w.cols) and w writes to: y (n, y_cols) of type `y_type`, named y_name, rows
// inner contiguous in both, y not x.
void check_output(const char* op, const char* y_name, const Tensor& x, const Weight& w, const Tensor& y, int64_t y_cols,
                  DType y_type = DType::f32) {
  const std::string out = y_name;
  detail::require_dtype(op, y_name, y, y_type);
  SANCTUM_REQUIRE(x.ndim() == 2 && y.ndim() == 2, op,
                  "x and " + out + " must be 2-D (n, k) and (n, m), got x " + x.shape_string() + ", " + out + " " + y.shape_string());
  SANCTUM_REQUIRE(x.dim(1) == w.cols, op,
                  "x rows have " + std::to_string(x.dim(1)) + " elements, weight '" + w.name + "' has " + std::to_string(w.cols) +
                      " in-features");
  SANCTUM_REQUIRE(y.dim(0) == x.dim(0) && y.dim(1) == y_cols, op,
                  out + " must be (" + std::to_string(x.dim(0)) + ", " + std::to_string(y_cols) + "), got " + y.shape_string());
  detail::require_inner_contiguous(op, "x", x);
  detail::require_inner_contiguous(op, y_name, y);
  SANCTUM_REQUIRE(x.raw() != y.raw(), op, out + " must not alias x");
}
}  // namespace

void matmul(const Tensor& x, const Weight& w, Tensor& y) {
  detail::require_defined(kOp, "x", x);
  detail::require_defined(kOp, "y", y);
  const Device device = detail::require_one_device(kOp, {{"x", &x}, {"y", &y}, {"weight", &w.data}});
  check_weight_layout(kOp, w);
  // x is f32, or bf16 where matmul_input_dtype says this matmul takes it so.
  if (!(x.dtype() == DType::bf16 && x.ndim() == 2 && matmul_input_dtype(w, x.dim(0), device) == DType::bf16))
    detail::require_dtype(kOp, "x", x, DType::f32);
  // y is f32, or bf16 where matmul_output_dtype says this matmul writes it so.
  const bool bf16_out = y.dtype() == DType::bf16 && x.ndim() == 2 && matmul_output_dtype(w, x.dim(0), device) == DType::bf16;
  check_output(kOp, "y", x, w, y, w.rows, bf16_out ? DType::bf16 : DType::f32);
  if (x.dim(0) == 0 || w.rows == 0) return;
  if (device == Device::cuda) return cuda::matmul(x, w, y);
  SANCTUM_REQUIRE(w.layout == WeightLayout::rows, kOp, "weight '" + w.name + "' is tiled for the GPU and cannot run on the CPU");
  if (w.quantized() && matmul_precision() == MatmulPrecision::int8) cpu::matmul_quantized_int8(x, w, y);
  else if (w.quantized()) cpu::matmul_quantized(x, w, y);
  else cpu::matmul_dense(x, w, y);
}

bool matmul_silu_mul_ok(const Weight& gate_up, const Tensor& x) {
  if (!x || !gate_up.data || x.ndim() != 2 || x.dtype() != DType::f32) return false;
  return x.device() == Device::cuda && gate_up.data.device() == Device::cuda && matmul_precision() != MatmulPrecision::f32 &&
         cuda::tiles_silu_mul_ok(gate_up, x);
}

void matmul_silu_mul(const Tensor& x, const Weight& gate_up, Tensor& act) {
  constexpr const char* kFused = "matmul_silu_mul";
  detail::require_defined(kFused, "act", act);
  SANCTUM_REQUIRE(matmul_silu_mul_ok(gate_up, x), kFused,
                  "no fused kernel takes weight '" + gate_up.name + "' with x " + x.shape_string() + "; use matmul and silu_mul");
  detail::require_one_device(kFused, {{"x", &x}, {"act", &act}, {"weight", &gate_up.data}});
  check_weight_layout(kFused, gate_up);
  check_output(kFused, "act", x, gate_up, act, gate_up.rows / 2);
  cuda::tiles_matvec_silu_mul(x, gate_up, act);
}

DType matmul_input_dtype(const Weight& w, int64_t rows, Device device) {
  return device == Device::cuda && cuda::matmul_takes_bf16(w, rows) ? DType::bf16 : DType::f32;
}

DType matmul_output_dtype(const Weight& w, int64_t rows, Device device) {
  return device == Device::cuda && cuda::matmul_gives_bf16(w, rows) ? DType::bf16 : DType::f32;
}

void prepare_weight(Weight& w) {
  check_weight_layout(kOp, w);
  if (w.data.device() == Device::cuda) return cuda::prepare_weight(w);
  cpu::prepare_weight(w);
  if (w.quantized() && matmul_precision() == MatmulPrecision::int8) cpu::prepare_weight_int8(w);
}

}  // namespace sanctum::ops

namespace sanctum::ops {

bool can_stack_rows(std::span<const Weight* const> parts) {
  if (parts.empty()) return false;
  const Weight& a = *parts[0];
  for (const Weight* w : parts) {
    if (w->cols != a.cols || w->layout != a.layout || w->quant.bits != a.quant.bits || w->quant.group_size != a.quant.group_size ||
        w->data.dtype() != a.data.dtype() || w->data.device() != a.data.device() || !w->data.is_contiguous() ||
        w->data.dim(1) != a.data.dim(1))
      return false;
    if (w->quantized() && (w->scales.dtype() != a.scales.dtype() || !w->scales.is_contiguous() || !w->biases.is_contiguous() ||
                           w->scales.dim(1) != a.scales.dim(1)))
      return false;
  }
  return true;
}

Weight stack_rows(std::span<const Weight* const> parts, std::string name) {
  SANCTUM_REQUIRE(can_stack_rows(parts), "stack_rows", "weights differ in columns, format, device or layout");
  const Weight& a = *parts[0];
  int64_t rows = 0;
  for (const Weight* w : parts) rows += w->rows;
  auto stack = [&](auto member) {
    const Tensor& first = a.*member;
    Tensor out = Tensor::zeros({rows, first.dim(1)}, first.dtype(), first.device());
    int64_t r0 = 0;
    for (const Weight* w : parts) {
      const Tensor& part = w->*member;
      Tensor dst = out.slice(0, r0, r0 + part.dim(0));
      dst.copy_from(part);
      r0 += part.dim(0);
    }
    return out;
  };
  Weight s;
  s.name = std::move(name);
  s.rows = rows;
  s.cols = a.cols;
  s.quant = a.quant;
  s.layout = a.layout;  // tiles stay valid: every tiled part holds whole 16-row blocks
  s.data = stack(&Weight::data);
  if (a.quantized()) {
    s.scales = stack(&Weight::scales);
    s.biases = stack(&Weight::biases);
  }
  validate_weight(s);
  prepare_weight(s);
  return s;
}

}  // namespace sanctum::ops

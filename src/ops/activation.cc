#include "ops/activation.h"

#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  constexpr const char* kOp = "silu_mul";
  detail::require_defined(kOp, "gate", gate);
  detail::require_defined(kOp, "up", up);
  detail::require_defined(kOp, "out", out);
  const Device device = detail::require_one_device(kOp, {{"gate", &gate}, {"up", &up}, {"out", &out}});
  // On the GPU gate and up may be bf16 together (a GEMM's output, matmul_output_dtype), and out bf16
  // (the input of a matmul that takes it so, matmul_input_dtype).
  const bool bf16_inputs = device == Device::cuda && gate.dtype() == DType::bf16 && up.dtype() == DType::bf16;
  for (const auto& [name, t] : {detail::Named{"gate", &gate}, detail::Named{"up", &up}, detail::Named{"out", &out}}) {
    const bool bf16_ok = device == Device::cuda && t->dtype() == DType::bf16 && (t == &out || bf16_inputs);
    if (!bf16_ok) detail::require_dtype(kOp, name, *t, DType::f32);
    detail::require_inner_contiguous(kOp, name, *t);
  }
  SANCTUM_REQUIRE(detail::same_shape(gate, up) && detail::same_shape(gate, out), kOp,
                  "gate " + gate.shape_string() + ", up " + up.shape_string() + " and out " + out.shape_string() + " must have one shape");
  if (device == Device::cuda) return cuda::silu_mul(gate, up, out);
  cpu::silu_mul(gate, up, out);
}

}  // namespace sanctum::ops

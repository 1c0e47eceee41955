#include "model/blocks/mlp.h"

#include "base/error.h"
#include "model/blocks/row_lora.h"
#include "model/blocks/stacked_linear.h"
#include "ops/ops.h"

namespace sanctum {

namespace {
enum Slot : size_t { kGate = 200, kUp, kGateUp, kAct };
}

MlpBlock::MlpBlock(Checkpoint& ckpt, const std::string& prefix, int64_t hidden, int64_t intermediate, const QuantConfig& quant,
                   const char* gate_name, const char* up_name, const char* down_name)
    : intermediate_(intermediate), gate_name_(prefix + gate_name), up_name_(prefix + up_name), down_name_(prefix + down_name) {
  gate_ = ckpt.linear(prefix + gate_name, intermediate, hidden, quant);
  up_ = ckpt.linear(prefix + up_name, intermediate, hidden, quant);
  down_ = ckpt.linear(prefix + down_name, hidden, intermediate, quant);
  for (Weight* w : {&gate_, &up_, &down_}) ops::prepare_weight(*w);
  gate_up_ = stack_linears(ckpt, {&gate_, &up_}, prefix + "{" + gate_name + "," + up_name + "}");
}

std::array<Weight, 3> MlpBlock::parts() const {
  if (gate_up_.rows == 0) return {gate_, up_, down_};
  auto rows_of = [&](int64_t row0) {
    Weight w = gate_up_;
    w.data = gate_up_.data.slice(0, row0, row0 + intermediate_);
    if (gate_up_.quantized()) {
      w.scales = gate_up_.scales.slice(0, row0, row0 + intermediate_);
      w.biases = gate_up_.biases.slice(0, row0, row0 + intermediate_);
    }
    w.rows = intermediate_;
    validate_weight(w);
    return w;
  };
  return {rows_of(0), rows_of(intermediate_), down_};
}

bool MlpBlock::takes_bf16_input(int64_t n) const {
  const Weight& first = gate_up_.rows > 0 ? gate_up_ : gate_;
  return ops::matmul_input_dtype(first, n, first.data.device()) == DType::bf16;
}

void MlpBlock::forward(const BlockInput& x, const BatchRows& batch, Workspace& ws, const BlockOutput& out) const {
  const int64_t n = x.rows();
  if (batch_has_lora(batch)) return forward_with_lora(x, batch, ws, out);
  // silu(gate) * up in the type the down projection reads (bf16 for a GPU prompt in the fast mode).
  const DType act_type = ops::matmul_input_dtype(down_, n, x.device());
  Tensor act = act_type == DType::f32 ? ws.get(kGate, n, intermediate_) : ws.get_typed(kAct, n, intermediate_, act_type);
  if (act_type == DType::f32 && x.silu_mul_ok(gate_up_)) {
    x.matmul_silu_mul(gate_up_, act);  // decode on a GPU: no launch for the SwiGLU
  } else if (gate_up_.rows > 0) {
    // gate and up in bf16 where the GEMM can round them on the way out (a GPU prompt in the fast mode):
    // the largest activation of a forward, written once and read once.
    const DType both_type = ops::matmul_output_dtype(gate_up_, n, x.device());
    Tensor both = both_type == DType::f32 ? ws.get(kGateUp, n, 2 * intermediate_) : ws.get_typed(kGateUp, n, 2 * intermediate_, both_type);
    x.matmul(gate_up_, both);
    ops::silu_mul(both.slice(1, 0, intermediate_), both.slice(1, intermediate_, 2 * intermediate_), act);
  } else {
    const DType part_type = ops::matmul_output_dtype(gate_, n, x.device());
    auto part = [&](size_t slot) {
      return part_type == DType::f32 ? ws.get(slot, n, intermediate_) : ws.get_typed(slot, n, intermediate_, part_type);
    };
    Tensor gate = part(kGate), up = part(kUp);
    x.matmul(gate_, gate);
    x.matmul(up_, up);
    ops::silu_mul(gate, up, act);
  }
  out.matmul(act, down_);
}

// The unstacked path with each sequence's adapter added to gate, up and down (CPU: --lora refuses a GPU).
void MlpBlock::forward_with_lora(const BlockInput& x, const BatchRows& batch, Workspace& ws, const BlockOutput& out) const {
  const int64_t n = x.rows();
  check(gate_up_.rows == 0, ErrorKind::unsupported,
        "per-request adapters need the MLP's gate and up apart: serve --lora with --device cpu");
  Tensor gate = ws.get(kGate, n, intermediate_), up = ws.get(kUp, n, intermediate_);
  x.matmul(gate_, gate);
  x.matmul(up_, up);
  add_row_lora(batch, gate_name_, x.tensor(), gate);
  add_row_lora(batch, up_name_, x.tensor(), up);
  ops::silu_mul(gate, up, gate);
  out.matmul(gate, down_);
  add_row_lora(batch, down_name_, gate, out);
}

DType MlpBlock::output_dtype(int64_t n) const { return ops::matmul_output_dtype(down_, n, down_.data.device()); }

}  // namespace sanctum

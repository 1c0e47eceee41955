#include "model/blocks/block_input.h"

#include "ops/matmul.h"
#include "ops/rms_norm.h"

namespace sanctum {

BlockInput::BlockInput(const Tensor& x) : x_(&x) {}

BlockInput::BlockInput(Tensor& h, const Tensor* delta, const Tensor& weight, float eps, float offset, Tensor& x)
    : x_(&x), out_(&x), form_(Form::pending), h_(&h), delta_(delta), weight_(&weight), eps_(eps), offset_(offset) {}

BlockInput::BlockInput(const ops::ScaledInput& scaled, Tensor& x) : x_(&x), out_(&x), form_(Form::scaled), scaled_(scaled) {}

void BlockInput::matmul(const Weight& w, Tensor& y) const {
  if (form_ == Form::scaled && ops::matmul_scaled_ok(scaled_, w)) return ops::matmul_scaled(scaled_, w, y);
  ops::matmul(tensor(), w, y);
}

bool BlockInput::silu_mul_ok(const Weight& gate_up) const {
  return (form_ == Form::scaled && ops::matmul_silu_mul_scaled_ok(scaled_, gate_up)) || ops::matmul_silu_mul_ok(gate_up, *x_);
}

void BlockInput::matmul_silu_mul(const Weight& gate_up, Tensor& act) const {
  if (form_ == Form::scaled && ops::matmul_silu_mul_scaled_ok(scaled_, gate_up)) return ops::matmul_silu_mul_scaled(scaled_, gate_up, act);
  ops::matmul_silu_mul(tensor(), gate_up, act);
}

const Tensor& BlockInput::tensor() const {
  if (form_ == Form::pending) {
    if (delta_ != nullptr) ops::add_rms_norm(*h_, *delta_, *weight_, eps_, *out_, offset_);
    else ops::rms_norm(*h_, *weight_, eps_, *out_, offset_);
  } else if (form_ == Form::scaled) {
    ops::apply_norm_scale(scaled_, *out_);
  }
  form_ = Form::ready;
  return *x_;
}

void BlockInput::finish() const {
  if (form_ == Form::pending) tensor();
}

}  // namespace sanctum

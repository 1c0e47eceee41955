#pragma once
// A sub-block's input, the normalised residual stream, in one of three forms:
//   ready:   x as it stands;
//   pending: rms_norm(h + delta) (delta null: of h), computed into x, h += delta in place, at the
//            first use (or at finish() if there is none: delta's buffer is the block's output);
//   scaled:  what the previous block's last projection prepared (ops::ScaledInput): the first
//            projections take it as it stands (ops::matmul_scaled), so no norm launch stands between
//            the two blocks, and any other use has x computed from it.
#include "ops/normed_matmul.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum {

class BlockInput {
 public:
  BlockInput(const Tensor& x);  // NOLINT(google-explicit-constructor): blocks also take plain tensors
  BlockInput(Tensor& h, const Tensor* delta, const Tensor& weight, float eps, float offset, Tensor& x);
  BlockInput(const ops::ScaledInput& scaled, Tensor& x);
  BlockInput(const BlockInput&) = delete;  // one owner of the pending h += delta
  BlockInput& operator=(const BlockInput&) = delete;

  int64_t rows() const { return x_->dim(0); }
  Device device() const { return x_->device(); }

  // ops::matmul of the input.
  void matmul(const Weight& w, Tensor& y) const;
  // ops::matmul_silu_mul of the input, where silu_mul_ok.
  bool silu_mul_ok(const Weight& gate_up) const;
  void matmul_silu_mul(const Weight& gate_up, Tensor& act) const;
  // The input as a tensor, computed now if it is not yet.
  const Tensor& tensor() const;
  // Adds a pending delta to h if no use has (the decoder calls this after the block).
  void finish() const;

 private:
  enum class Form { ready, pending, scaled };

  const Tensor* x_;
  Tensor* out_ = nullptr;  // x_, writable: where a pending or scaled input is computed
  mutable Form form_ = Form::ready;
  // pending
  Tensor* h_ = nullptr;
  const Tensor* delta_ = nullptr;
  const Tensor* weight_ = nullptr;
  float eps_ = 0.0f, offset_ = 0.0f;
  // scaled
  ops::ScaledInput scaled_;
};

}  // namespace sanctum

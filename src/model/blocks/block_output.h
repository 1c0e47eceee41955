#pragma once
// Where a sub-block's last projection goes: delta, which the decoder adds to the residual stream, or,
// where the decoder offers it and a kernel takes it (ops::matmul_residual: one row on a GPU), straight
// into the stream with the next sub-block's norm prepared (the next BlockInput's scaled form).
#include <cstdint>

#include "ops/normed_matmul.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum {

class BlockOutput {
 public:
  BlockOutput(Tensor& delta);  // NOLINT(google-explicit-constructor): blocks also write plain tensors
  BlockOutput(Tensor& delta, const ops::ResidualNorm& residual);
  BlockOutput(const BlockOutput&) = delete;
  BlockOutput& operator=(const BlockOutput&) = delete;

  // The block's last projection: delta = x · wᵀ, or the residual form.
  void matmul(const Tensor& x, const Weight& w) const;
  Tensor& delta() const { return *delta_; }
  // For a block whose output comes from another kernel (a MoE combine): the residual form, if
  // offered, and, once that kernel has taken it, the count of squares it left.
  const ops::ResidualNorm* offered() const { return offered_ ? &residual_ : nullptr; }
  void took(int64_t squares) const { squares_ = squares; }
  // After the block: whether the projection took the residual form, and the count of squares it left.
  bool into_residual() const { return squares_ > 0; }
  int64_t squares() const { return squares_; }

 private:
  Tensor* delta_;
  ops::ResidualNorm residual_;
  bool offered_ = false;
  mutable int64_t squares_ = 0;
};

}  // namespace sanctum

#include "model/blocks/block_output.h"

#include "ops/matmul.h"

namespace sanctum {

BlockOutput::BlockOutput(Tensor& delta) : delta_(&delta) {}

BlockOutput::BlockOutput(Tensor& delta, const ops::ResidualNorm& residual) : delta_(&delta), residual_(residual), offered_(true) {}

void BlockOutput::matmul(const Tensor& x, const Weight& w) const {
  if (offered_ && ops::matmul_residual_ok(x, w, residual_)) {
    squares_ = ops::matmul_residual(x, w, residual_);
    return;
  }
  ops::matmul(x, w, *delta_);
}

}  // namespace sanctum

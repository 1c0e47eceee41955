#pragma once
// CUDA entry points of ops/sampling.h (src/ops/cuda/sampling.cu; stand-ins in no_cuda/sampling.cc).
// Arguments are checked by the front end; every tensor is on the GPU. The ids stay on the device
// (the caller copies them back, a few bytes).
#include <span>

#include "ops/sampling.h"
#include "tensor/tensor.h"

namespace sanctum::ops::cuda {

void argmax_rows(const Tensor& logits, Tensor& ids, const Tensor& allowed);
void sample_rows(const Tensor& logits, const RowSampling& sampling, std::span<const double> uniforms, Tensor& ids, const Tensor& allowed);
void feed_pick(const Tensor& picked, Tensor& step);

}  // namespace sanctum::ops::cuda

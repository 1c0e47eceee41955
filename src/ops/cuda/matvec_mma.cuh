#pragma once
// The tensor-core 4-bit mat-vec (matvec_mma.cu), which matmul.cu picks in the bf16 precision mode.
#include <cstdint>

#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops::cuda {

// MLX 4-bit, groups of 64 or 128, bf16/f16 scales, rows a multiple of 16, columns of 64, rows
// contiguous and 16-byte aligned; 1 to 8 x rows.
bool mma_matvec_ok(const Weight& w, const Tensor& x, int64_t n);
// y (n, rows) = x (n, cols) · wᵀ with x rounded to bf16, sums in f32.
void mma_matvec(const Tensor& x, const Weight& w, Tensor& y);

}  // namespace sanctum::ops::cuda

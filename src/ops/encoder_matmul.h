#pragma once
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops {

// y = x · wᵀ for an encoder's projections (the vision tower's): thousands of rows at once, no
// batch-invariance contract. x: (n, k) f32, y: (n, w.rows) f32, rows may be strided. A dense weight
// on the CPU goes through the packed GEMM (cpu/gemm_f32.h, whose sums are blocked differently from
// matmul's, so the text model keeps ops::matmul); on the GPU in the f32 precision mode any row-layout
// weight through one f32 cuBLAS GEMM without TF32; any other case through ops::matmul.
void encoder_matmul(const Tensor& x, const Weight& w, Tensor& y);

}  // namespace sanctum::ops

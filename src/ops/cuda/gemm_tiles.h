#pragma once
// The prefill GEMM over 4-bit tiled weights on Hopper's warpgroup MMA (gemm_tiles.cu), which
// dequantizes in registers where the general path writes a bf16 copy of the weight for cuBLAS.
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops::cuda {

// This GPU runs the kernel (an sm_90 device and a build with sm_90a code; tuning tiles_gemm=0: never,
// for comparisons). The first call probes the device and waits for it.
bool tiles_gemm_supported();
// A tiled weight with bf16 scales and x (n, cols) rows of f32 or bf16, on a GPU that runs the kernel.
bool tiles_gemm_ok(const Weight& w, const Tensor& x);
// Where the GEMM beats the dequantized copy for cuBLAS (copy_gemm), so matmul takes it.
bool tiles_gemm_preferred(const Weight& w, int64_t n);
// y (n, rows) f32 or bf16 = x · wᵀ, x rounded to bf16, the weight's values those of the dequantized
// copy (scale * code + bias, rounded once to bf16), sums in f32 (bf16 y: each rounded once).
void tiles_gemm(const Tensor& x, const Weight& w, Tensor& y);
// The general prompt GEMM, for any weight: w dequantized (or converted) to a bf16 copy, x rounded to
// bf16, cuBLAS with f32 sums into f32 or bf16 y (matmul.cu).
void copy_gemm(const Tensor& x, const Weight& w, Tensor& y);

}  // namespace sanctum::ops::cuda

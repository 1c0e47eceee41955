#pragma once
// Scalar twin of ops/cpu/gemm_bf16.h: the products with both operands rounded to bf16 (nearest even)
// and summed in f64, the truth a kernel that sums in f32 is held to.
#include <cstdint>

namespace sanctum::ops::ref {

// C (m x n) = bf16(A) bf16(B), A (m x kk) and B (kk x n) row-major f32 with leading dims.
void gemm_bf16(int64_t m, int64_t n, int64_t kk, const float* A, int64_t lda, const float* B, int64_t ldb, double* C, int64_t ldc);

}  // namespace sanctum::ops::ref

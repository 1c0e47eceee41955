#pragma once
// Scalar twin of ops/cpu/gemm_f32.h: the products summed in f64, the truth the packed kernel's f32
// sums are held to.
#include <cstdint>

#include "ops/cpu/gemm_f32.h"

namespace sanctum::ops::ref {

// C (m x n, ldc) = A (m x k, lda) · B, B as in cpu::GemmB.
void gemm_f32(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const cpu::GemmB& B, double* C, int64_t ldc);

}  // namespace sanctum::ops::ref

#include "ops/ref/gemm_bf16.h"

#include "tensor/dtype.h"

namespace sanctum::ops::ref {

void gemm_bf16(int64_t m, int64_t n, int64_t kk, const float* A, int64_t lda, const float* B, int64_t ldb, double* C, int64_t ldc) {
  auto round = [](float x) { return static_cast<double>(bf16_to_f32(f32_to_bf16(x))); };
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < kk; ++p) sum += round(A[i * lda + p]) * round(B[p * ldb + j]);
      C[i * ldc + j] = sum;
    }
}

}  // namespace sanctum::ops::ref

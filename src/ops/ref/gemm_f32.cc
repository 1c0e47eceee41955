#include "ops/ref/gemm_f32.h"

namespace sanctum::ops::ref {

void gemm_f32(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const cpu::GemmB& B, double* C, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const int64_t at = B.transposed ? j * B.ld + p : p * B.ld + j;
        s += static_cast<double>(A[i * lda + p]) * static_cast<double>(load_as_f32(B.data, B.dtype, at));
      }
      C[i * ldc + j] = s;
    }
}

}  // namespace sanctum::ops::ref

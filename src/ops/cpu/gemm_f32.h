#pragma once
// A packed, register-blocked f32 GEMM for large products (the vision tower's projections and its
// attention's two products per head): C = A · B with f32 accumulation. B is copied into panels in
// the micro-kernel's order (converted to f32 while packing), A is read in place, the reduction is
// blocked so a panel of B stays in L1 and a block of A in L2, and the pool splits the rows of C. Summation order
// depends on the blocking, not on the thread count; it is not matmul_dense's order, so the text
// model (whose batched and solo forwards must agree bit for bit) does not use it.
// ops/ref/gemm_f32.h is the scalar twin.
#include <cstdint>

#include "hwy/aligned_allocator.h"
#include "tensor/dtype.h"

namespace sanctum::ops::cpu {

// The B operand (k x n) of a product: element (p, j) at data[p * ld + j] (f32, bf16 or f16), or with
// `transposed` at data[j * ld + p] (a weight's rows, or the keys of attention).
struct GemmB {
  const void* data = nullptr;
  DType dtype = DType::f32;
  int64_t ld = 0;
  bool transposed = false;
};

// C (m x n, ldc) = A (m x k, lda, f32) · B; C is only written. Any m, n, k >= 0.
void gemm_f32(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const GemmB& B, float* C, int64_t ldc);

// B (k x n) packed once for several products (an attention head's keys or values against each block
// of its queries), for the SIMD target this process runs.
struct PackedGemmB {
  int64_t k = 0, n = 0;
  int64_t panel = 0;  // the panel width (floats) of the target it was packed for
  hwy::AlignedFreeUniquePtr<float[]> data;
};

// Packs B over the compute pool.
PackedGemmB pack_gemm_b(int64_t k, int64_t n, const GemmB& B);

// C (m x B.n, ldc) = A (m x B.k, lda) · B on the calling thread alone: for callers that split their
// own work over the pool. The same sums as gemm_f32.
void gemm_f32_packed(int64_t m, const float* A, int64_t lda, const PackedGemmB& B, float* C, int64_t ldc);

}  // namespace sanctum::ops::cpu

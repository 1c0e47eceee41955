#pragma once
// Small GEMMs with bf16 operands and f32 accumulation (AVX512_BF16 vdpbf16ps: 32 multiply-adds per
// instruction against 16 for an f32 FMA) for the chunked GatedDeltaNet's fast mode. Operands are
// rounded to bf16 (nearest even) by the pack functions; products of two bf16 values are exact in
// f32, so the only other rounding is the f32 sum. Each C element is one f32 chain over reduction
// pairs in order, so results do not depend on the tiling or thread count. ops/ref/gemm_bf16.h is the
// scalar twin. Plain C++ interface; callers check bf16_gemm_available() first.
#include <cstdint>

namespace sanctum::ops::cpu {

// The CPU runs vdpbf16ps (avx512_bf16, with the OS saving AVX-512 state) and this build has it.
bool bf16_gemm_available();

// A operand (m x kk, reduction along rows): each f32 row times scale rounded to kk bf16 values, then
// zeros to an even count. lds in floats, ldd in bf16 values (even).
void pack_rows_bf16(const float* src, int64_t lds, int64_t rows, int64_t kk, uint16_t* dst, int64_t ldd, float scale = 1.0f);

// B operand (kk x n, reduction down columns): row pair p of the result holds rows 2p and 2p+1
// interleaved per column, (B[2p][j], B[2p+1][j]) as one 32-bit word (a missing odd row is zero).
// n a multiple of 16; lds in floats, ldd in words. row_scale (kk values, optional): row p is
// multiplied by row_scale[p] in f32 before rounding.
void pack_pairs_bf16(const float* src, int64_t lds, int64_t kk, int64_t n, uint32_t* dst, int64_t ldd, const float* row_scale = nullptr);

// The B operand of Aᵀ (kk x m; as for A Aᵀ) from A's packed rows: word p of row j of A becomes
// column j of pair row p; columns m..n (n a multiple of 16) are zero. Exact (no rounding).
void pairs_of_transpose_bf16(const uint16_t* A, int64_t lda, int64_t m, int64_t kk, uint32_t* dst, int64_t ldd,
                             int64_t n);  // lda even

// The bf16 rows of a B operand (kk x n, from pack_pairs_bf16 or the above), as A operand rows of
// n values each (ldd even, >= n). Exact.
void unpack_pairs_bf16(const uint32_t* B, int64_t ldb, int64_t kk, int64_t n, uint16_t* dst, int64_t ldd);

// Optional parts of a product (gemm_bf16's last argument).
struct GemmBf16Extra {
  // The old C read from c_in (ldc_in floats) instead of C; with c_row_scale, row i's old values are
  // multiplied by c_row_scale[i] instead of c_scale (rounded to f32, then the sum, as for c_scale).
  const float* c_in = nullptr;
  int64_t ldc_in = 0;
  const float* c_row_scale = nullptr;
  // C written with non-temporal stores (where its rows are 64-byte aligned): no read of C's lines
  // before they are overwritten, nothing of C kept in cache. Only with c_in or c_scale = 0.
  bool stream = false;
};

// C (m x n) = A B + c_scale C over kk reduction steps (c_scale C rounded to f32 first, then the sum;
// c_scale = 0: C is only written), A from pack_rows_bf16 (lda in bf16 values), B from
// pack_pairs_bf16 (ldb in words); n a multiple of 16.
// lower_a: A[i][p] = 0 for p > i (row blocks stop their reduction after their last row).
// lower_c: only C[i][j] for j <= i is wanted (others are left unspecified).
// c_pairs (optional, ldcp words): also the new C as a B operand, as pack_pairs_bf16(C) would give it.
void gemm_bf16(int64_t m, int64_t n, int64_t kk, const uint16_t* A, int64_t lda, const uint32_t* B, int64_t ldb, float* C, int64_t ldc,
               float c_scale, bool lower_a = false, bool lower_c = false, uint32_t* c_pairs = nullptr, int64_t ldcp = 0,
               const GemmBf16Extra* extra = nullptr);

}  // namespace sanctum::ops::cpu

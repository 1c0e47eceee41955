// Register-tiled f32 GEMM for the small panels of the chunked GatedDeltaNet (64 x 128 by 128 x 128
// and the like, all in L1/L2): C (m x n) =/+=/-= A (m x kk) B (kk x n), row-major with leading dims,
// n a multiple of the vector width (zero-padded scratch). Each C element is one f32 FMA chain over
// p = 0..kk-1 in order, so the result does not depend on the tiling or the thread count.
// Per-target (Highway's -inl pattern: included after hwy/highway.h inside a foreach_target unit).
#if defined(SANCTUM_OPS_CPU_SMALL_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SANCTUM_OPS_CPU_SMALL_GEMM_INL_H_
#undef SANCTUM_OPS_CPU_SMALL_GEMM_INL_H_
#else
#define SANCTUM_OPS_CPU_SMALL_GEMM_INL_H_
#endif

#include <algorithm>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

enum class Acc { set, add, sub };

// Tile shape: MR rows x NV vectors of accumulators. 8 x 2 (16 accumulators, 2 rows of B, one
// broadcast) fills AVX-512's 32 registers with room to spare and measured ~1.25x faster than 4 x 4
// there (fewer loads per FMA); 4 x 2 fits the 16 registers below AVX-512.
#if HWY_TARGET <= HWY_AVX3
constexpr int kGemmMR = 8;
#else
constexpr int kGemmMR = 4;
#endif
constexpr int kGemmNV = 2;

template <int MR, int NV>
HWY_INLINE void GemmTile(const float* HWY_RESTRICT A, int64_t lda, const float* HWY_RESTRICT B, int64_t ldb, float* HWY_RESTRICT C,
                         int64_t ldc, int64_t kk, Acc acc) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<decltype(df)> c[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) c[r][v] = hn::Zero(df);
  for (int64_t p = 0; p < kk; ++p) {
    hn::Vec<decltype(df)> b[NV];
    for (int v = 0; v < NV; ++v) b[v] = hn::LoadU(df, B + p * ldb + v * N);
    for (int r = 0; r < MR; ++r) {
      const auto a = hn::Set(df, A[r * lda + p]);
      for (int v = 0; v < NV; ++v) c[r][v] = hn::MulAdd(a, b[v], c[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      float* cp = C + r * ldc + v * N;
      if (acc == Acc::set) hn::StoreU(c[r][v], df, cp);
      else if (acc == Acc::add) hn::StoreU(hn::Add(hn::LoadU(df, cp), c[r][v]), df, cp);
      else hn::StoreU(hn::Sub(hn::LoadU(df, cp), c[r][v]), df, cp);
    }
}

template <int MR>
HWY_INLINE void GemmRows(int nv, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t kk, Acc acc) {
  if (nv >= 2) return GemmTile<MR, 2>(A, lda, B, ldb, C, ldc, kk, acc);
  return GemmTile<MR, 1>(A, lda, B, ldb, C, ldc, kk, acc);
}

// lower_a: A[i][p] = 0 for p > i, so a row block stops its reduction after its last row.
// lower_c: only C[i][j] for j <= i is wanted (tiles right of a row block's diagonal are skipped;
// other entries are left unspecified).
inline void SmallGemm(int64_t m, int64_t n, int64_t kk, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
                      Acc acc, bool lower_a = false, bool lower_c = false) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), nvec = n / N;
  // Column panels outer: a panel of B (kk x NV vectors) stays in L1 while the row blocks pass.
  for (int64_t v0 = 0; v0 < nvec; v0 += kGemmNV) {
    const int nv = static_cast<int>(std::min<int64_t>(kGemmNV, nvec - v0));
    for (int64_t i0 = 0; i0 < m; i0 += kGemmMR) {
      const int64_t mr = std::min<int64_t>(kGemmMR, m - i0);
      // lower_c: the vectors of this panel that reach these rows' diagonal (none: skip).
      const int64_t need = lower_c ? std::min<int64_t>(nv, (i0 + mr + N - 1) / N - v0) : nv;
      if (need <= 0) continue;
      const int64_t kend = lower_a ? std::min(kk, i0 + mr) : kk;
      const float* a = A + i0 * lda;
      const float* b = B + v0 * N;
      float* c = C + i0 * ldc + v0 * N;
      const int nvr = static_cast<int>(need);
      switch (mr) {
        case 1: GemmRows<1>(nvr, a, lda, b, ldb, c, ldc, kend, acc); break;
        case 2: GemmRows<2>(nvr, a, lda, b, ldb, c, ldc, kend, acc); break;
        case 3: GemmRows<3>(nvr, a, lda, b, ldb, c, ldc, kend, acc); break;
#if HWY_TARGET <= HWY_AVX3
        case 4: GemmRows<4>(nvr, a, lda, b, ldb, c, ldc, kend, acc); break;
        case 5: GemmRows<5>(nvr, a, lda, b, ldb, c, ldc, kend, acc); break;
        case 6: GemmRows<6>(nvr, a, lda, b, ldb, c, ldc, kend, acc); break;
        case 7: GemmRows<7>(nvr, a, lda, b, ldb, c, ldc, kend, acc); break;
#endif
        default: GemmRows<kGemmMR>(nvr, a, lda, b, ldb, c, ldc, kend, acc); break;
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#endif  // SANCTUM_OPS_CPU_SMALL_GEMM_INL_H_

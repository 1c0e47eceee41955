// The packed f32 GEMM (see gemm_f32.h). B is packed whole, once per product, and shared; then each
// row block of A (kMC rows) runs reduction block by reduction block (kKC), its columns there swept
// against each B panel by an outer-product micro-kernel of kMR rows x kNV vectors. A is read in place
// (kMR row streams of broadcasts): packing it cost as much as the product where B is narrow (p · v_h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/gemm_f32.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "ops/cpu/convert-inl.h"

#include <algorithm>
#include <atomic>

#include "base/error.h"
#include "base/thread_pool.h"
#include "hwy/aligned_allocator.h"
#include "ops/cpu/gemm_f32.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {

// Accumulators: kMR x kNV vectors, plus kNV of B and one broadcast of A, within the register file.
#if HWY_TARGET <= HWY_AVX3
constexpr int kMR = 8, kNV = 3;
#elif HWY_TARGET <= HWY_AVX2
constexpr int kMR = 6, kNV = 2;
#else
constexpr int kMR = 4, kNV = 2;
#endif
constexpr int64_t kKC = 192;       // reduction block: a (kKC x kNV vectors) panel of B stays in L1
constexpr int64_t kMC = 16 * kMR;  // rows of A per block: the block's kKC columns stay in L2

// B reduction rows [p0, p0 + kc) x columns [j0, j0 + cols) as one panel of width w (a whole number
// of vectors >= cols): element (p, j) at dst[p * w + j], columns past cols zero.
void PackB(const GemmB& B, int64_t p0, int64_t kc, int64_t j0, int64_t cols, int64_t w, float* HWY_RESTRICT dst) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  if (B.transposed) {  // column j is a contiguous row of the source
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t at = (j0 + j) * B.ld + p0;
      for (int64_t p = 0; p < kc; ++p) dst[p * w + j] = load_as_f32(B.data, B.dtype, at + p);
    }
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t j = cols; j < w; ++j) dst[p * w + j] = 0.0f;
    return;
  }
  for (int64_t p = 0; p < kc; ++p) {
    const int64_t at = (p0 + p) * B.ld + j0;
    float* d = dst + p * w;
    int64_t j = 0;
    for (; j + N <= cols; j += N) hn::Store(LoadAsF32(df, B.data, B.dtype, at + j), df, d + j);
    for (; j < cols; ++j) d[j] = load_as_f32(B.data, B.dtype, at + j);
    for (; j < w; ++j) d[j] = 0.0f;
  }
}

// C tile (rows x cols of kMR x NV vectors) = (first ? 0 : C) + A's rows a[0..kMR) · b_panel over kc.
// A is read in place, a broadcast per element: its kMR rows stream in order (rows past `rows` repeat
// the last one and are not stored).
template <int NV>
HWY_INLINE void Micro(const float* const* a, const float* HWY_RESTRICT b, int64_t kc, float* c, int64_t ldc, bool first, int64_t rows,
                      int64_t cols) {
  const hn::ScalableTag<float> df;
  constexpr int64_t kMax = hn::MaxLanes(df);
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<decltype(df)> acc[kMR][NV];
  for (int r = 0; r < kMR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = hn::Zero(df);
  for (int64_t p = 0; p < kc; ++p) {
    hn::Vec<decltype(df)> bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = hn::Load(df, b + (p * NV + v) * N);
    for (int r = 0; r < kMR; ++r) {
      const auto av = hn::Set(df, a[r][p]);
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(av, bv[v], acc[r][v]);
    }
  }
  if (rows == kMR && cols == NV * N) {
    for (int r = 0; r < kMR; ++r)
      for (int v = 0; v < NV; ++v) {
        float* cp = c + r * ldc + v * N;
        hn::StoreU(first ? acc[r][v] : hn::Add(acc[r][v], hn::LoadU(df, cp)), df, cp);
      }
    return;
  }
  HWY_ALIGN float tile[kMR * NV * kMax];
  for (int r = 0; r < kMR; ++r)
    for (int v = 0; v < NV; ++v) hn::Store(acc[r][v], df, tile + (r * NV + v) * N);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      float* cp = c + r * ldc + j;
      *cp = first ? tile[r * NV * N + j] : tile[r * NV * N + j] + *cp;
    }
}

// Room for the packed B: reduction block pb (kKC rows, kc of them) at pb * kKC * npad, its panel q
// at + q * W * kc. Up to kKeptFloats it is kept per calling thread (a fresh one per product
// page-faults every time); a larger one (the merger's) lives in `owned` for this product only.
constexpr size_t kKeptFloats = size_t{8} << 20;  // 32 MiB: the tower's MLP weights as f32

float* PackedBuffer(size_t floats, hwy::AlignedFreeUniquePtr<float[]>& owned) {
  if (floats > kKeptFloats) {
    owned = hwy::AllocateAligned<float>(floats);
    return owned.get();
  }
  thread_local hwy::AlignedFreeUniquePtr<float[]> kept;
  thread_local size_t capacity = 0;
  if (floats > capacity) {
    kept = hwy::AllocateAligned<float>(floats);
    capacity = floats;
  }
  return kept.get();
}

int64_t GemmPanelWidth() { return kNV * static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())); }

// All of B into bpack (layout as PackedBuffer says), panels handed out one at a time over the pool.
void PackAll(int64_t k, int64_t n, const GemmB& B, float* bpack) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())), W = GemmPanelWidth();
  const int64_t panels = (n + W - 1) / W, npad = panels * W, kblocks = (k + kKC - 1) / kKC;
  std::atomic<int64_t> next{0};
  compute_pool().run_on_all([&](int) {
    for (int64_t item; (item = next.fetch_add(1, std::memory_order_relaxed)) < kblocks * panels;) {
      const int64_t pb = item / panels, q = item % panels, p0 = pb * kKC, kc = std::min(kKC, k - p0);
      const int64_t cols = std::min(W, n - q * W);
      PackB(B, p0, kc, q * W, cols, (cols + N - 1) / N * N, bpack + p0 * npad + q * W * kc);
    }
  });
}

// Rows [i0, i0 + mc) of C = A · B from the packed B, reduction block by reduction block (the rows'
// kc columns of A stay in L2 across the panels).
void RowBlock(int64_t i0, int64_t mc, int64_t n, int64_t k, const float* A, int64_t lda, const float* bpack, float* C, int64_t ldc) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())), W = GemmPanelWidth();
  const int64_t panels = (n + W - 1) / W, npad = panels * W;
  for (int64_t p0 = 0; p0 < k; p0 += kKC) {
    const int64_t kc = std::min(kKC, k - p0);
    for (int64_t q = 0; q < panels; ++q) {
      const int64_t cols = std::min(W, n - q * W), nv = (cols + N - 1) / N;
      const float* bp = bpack + p0 * npad + q * W * kc;
      for (int64_t t0 = 0; t0 < mc; t0 += kMR) {
        float* cp = C + (i0 + t0) * ldc + q * W;
        const int64_t rows = std::min<int64_t>(kMR, mc - t0);
        const float* ap[kMR];
        for (int64_t r = 0; r < kMR; ++r) ap[r] = A + (i0 + t0 + std::min(r, rows - 1)) * lda + p0;
        if (nv == kNV) Micro<kNV>(ap, bp, kc, cp, ldc, p0 == 0, rows, cols);
        else if (nv == 1) Micro<1>(ap, bp, kc, cp, ldc, p0 == 0, rows, cols);
        else Micro<(kNV > 2 ? 2 : 1)>(ap, bp, kc, cp, ldc, p0 == 0, rows, cols);
      }
    }
  }
}

void GemmF32(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const GemmB& B, float* C, int64_t ldc) {
  const int64_t W = GemmPanelWidth();
  hwy::AlignedFreeUniquePtr<float[]> owned;
  float* bpack = PackedBuffer(static_cast<size_t>(k * ((n + W - 1) / W * W)), owned);
  // Two parallel regions per product, work handed out one item at a time: on a machine shared with
  // other processes a thread that loses its core holds the others up for one item, not a fixed share.
  // (Which thread computes an item does not change its sums.)
  PackAll(k, n, B, bpack);
  const int64_t blocks = (m + kMC - 1) / kMC;
  std::atomic<int64_t> next{0};
  compute_pool().run_on_all([&](int) {
    for (int64_t blk; (blk = next.fetch_add(1, std::memory_order_relaxed)) < blocks;)
      RowBlock(blk * kMC, std::min(kMC, m - blk * kMC), n, k, A, lda, bpack, C, ldc);
  });
}

void GemmPacked(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* bpack, float* C, int64_t ldc) {
  for (int64_t i0 = 0; i0 < m; i0 += kMC) RowBlock(i0, std::min(kMC, m - i0), n, k, A, lda, bpack, C, ldc);
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(GemmF32);
HWY_EXPORT(GemmPanelWidth);
HWY_EXPORT(PackAll);
HWY_EXPORT(GemmPacked);

namespace {
void check_dtype(const GemmB& B) {
  check(B.dtype == DType::f32 || B.dtype == DType::bf16 || B.dtype == DType::f16, ErrorKind::internal,
        std::string("gemm_f32: B must be f32, bf16 or f16, got ") + dtype_name(B.dtype) + "; dequantize it or use ops::matmul");
}

void zero_rows(int64_t m, int64_t n, float* C, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) std::fill(C + i * ldc, C + i * ldc + n, 0.0f);
}
}  // namespace

void gemm_f32(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const GemmB& B, float* C, int64_t ldc) {
  check_dtype(B);
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return zero_rows(m, n, C, ldc);
  HWY_DYNAMIC_DISPATCH(GemmF32)(m, n, k, A, lda, B, C, ldc);
}

PackedGemmB pack_gemm_b(int64_t k, int64_t n, const GemmB& B) {
  check_dtype(B);
  PackedGemmB p;
  p.k = k;
  p.n = n;
  p.panel = HWY_DYNAMIC_DISPATCH(GemmPanelWidth)();
  if (k <= 0 || n <= 0) return p;
  p.data = hwy::AllocateAligned<float>(static_cast<size_t>(k * ((n + p.panel - 1) / p.panel * p.panel)));
  HWY_DYNAMIC_DISPATCH(PackAll)(k, n, B, p.data.get());
  return p;
}

void gemm_f32_packed(int64_t m, const float* A, int64_t lda, const PackedGemmB& B, float* C, int64_t ldc) {
  check(B.panel == HWY_DYNAMIC_DISPATCH(GemmPanelWidth)(), ErrorKind::internal,
        "gemm_f32_packed: B was packed for another SIMD target; pack it again with pack_gemm_b");
  if (m <= 0 || B.n <= 0) return;
  if (B.k <= 0) return zero_rows(m, B.n, C, ldc);
  HWY_DYNAMIC_DISPATCH(GemmPacked)(m, B.n, B.k, A, lda, B.data.get(), C, ldc);
}

}  // namespace sanctum::ops::cpu
#endif

// y = x · wᵀ for dense f32 / bf16 / f16 weights, f32 accumulation.
// Numerics contract (shared by the mat-vec and the mat-mat paths): for each (x row, w row) pair one
// f32 lane accumulator runs over k in whole vectors in order, is reduced with SumOfLanes, then the
// k tail (k % lanes) is added in order. Register blocking only changes which pairs run together,
// never a pair's operation sequence, so a row of y is the same bits for any n and thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/matmul_dense.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "ops/cpu/convert-inl.h"

#include <algorithm>

#include "base/thread_pool.h"
#include "ops/cpu/kernels.h"
#include "ops/op_util.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {

struct DenseF32 {
  using T = float;
};
struct DenseBF16 {
  using T = uint16_t;
};
struct DenseF16 {
  using T = uint16_t;
};

template <class Fmt, class DF>
HWY_INLINE hn::Vec<DF> LoadW(DF df, const typename Fmt::T* p) {
  if constexpr (std::is_same_v<Fmt, DenseBF16>) return LoadBF16(df, p);
  else if constexpr (std::is_same_v<Fmt, DenseF16>) return LoadF16(df, p);
  else return hn::LoadU(df, p);
}

template <class Fmt>
HWY_INLINE float ScalarW(const typename Fmt::T* p, int64_t c) {
  if constexpr (std::is_same_v<Fmt, DenseBF16>) return bf16_to_f32(p[c]);
  else if constexpr (std::is_same_v<Fmt, DenseF16>) return f16_to_f32(p[c]);
  else return p[c];
}

// NX x rows against NW weight rows; y[x][w] written to ys[x][w_index].
template <class Fmt, int NX, int NW>
HWY_INLINE void DenseTile(const float* const* xs, const typename Fmt::T* const* ws, int64_t k, float* const* ys) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<decltype(df)> acc[NX][NW];
  for (int x = 0; x < NX; ++x)
    for (int w = 0; w < NW; ++w) acc[x][w] = hn::Zero(df);
  const int64_t full = k / N * N;
  for (int64_t c = 0; c < full; c += N) {
    hn::Vec<decltype(df)> wv[NW];
    for (int w = 0; w < NW; ++w) wv[w] = LoadW<Fmt>(df, ws[w] + c);
    for (int x = 0; x < NX; ++x) {
      const auto xv = hn::LoadU(df, xs[x] + c);
      for (int w = 0; w < NW; ++w) acc[x][w] = hn::MulAdd(wv[w], xv, acc[x][w]);
    }
  }
  for (int x = 0; x < NX; ++x)
    for (int w = 0; w < NW; ++w) {
      float s = hn::GetLane(hn::SumOfLanes(df, acc[x][w]));
      for (int64_t c = full; c < k; ++c) s += xs[x][c] * ScalarW<Fmt>(ws[w], c);
      ys[x][w] = s;
    }
}

#if HWY_TARGET <= HWY_AVX3
constexpr int kDenseNX = 4, kDenseNW = 4, kDenseVecNW = 4;
#else
constexpr int kDenseNX = 2, kDenseNW = 3, kDenseVecNW = 4;
#endif
constexpr int64_t kDensePanel = 64;  // x rows per panel: the panel stays in L2 while weight rows stream

template <class Fmt>
void DenseRun(const Tensor& x, const Weight& wt, Tensor& y) {
  using T = typename Fmt::T;
  const int64_t n = x.dim(0), k = wt.cols, m = wt.rows;
  const T* wbase = wt.data.data<const T>();
  const int64_t wstride = wt.data.stride(0);
  const float* xbase = x.data<const float>();
  float* ybase = y.data<float>();
  const int64_t xstride = x.stride(0), ystride = y.stride(0);
  ThreadPool& pool = compute_pool();
  const int64_t grain = std::max<int64_t>(16, 65536 / std::max<int64_t>(k, 1));
  for (int64_t p0 = 0; p0 < n; p0 += kDensePanel) {
    const int64_t p1 = std::min(n, p0 + kDensePanel);
    pool.parallel_for(m, grain, [&](int64_t r0, int64_t r1) {
      const int nw_block = p1 - p0 == 1 ? kDenseVecNW : kDenseNW;
      for (int64_t r = r0; r < r1;) {
        const int nw = r + nw_block <= r1 ? nw_block : 1;
        const T* ws[kDenseVecNW > kDenseNW ? kDenseVecNW : kDenseNW];
        for (int w = 0; w < nw; ++w) ws[w] = wbase + (r + w) * wstride;
        for (int64_t i = p0; i < p1;) {
          const int nx = i + kDenseNX <= p1 ? kDenseNX : 1;
          const float* xs[kDenseNX];
          float* ys[kDenseNX];
          for (int j = 0; j < nx; ++j) {
            xs[j] = xbase + (i + j) * xstride;
            ys[j] = ybase + (i + j) * ystride + r;
          }
          if (nx == 1 && nw == kDenseVecNW && p1 - p0 == 1) DenseTile<Fmt, 1, kDenseVecNW>(xs, ws, k, ys);
          else if (nx == 1 && nw == kDenseNW) DenseTile<Fmt, 1, kDenseNW>(xs, ws, k, ys);
          else if (nx == 1) DenseTile<Fmt, 1, 1>(xs, ws, k, ys);
          else if (nw == kDenseNW) DenseTile<Fmt, kDenseNX, kDenseNW>(xs, ws, k, ys);
          else DenseTile<Fmt, kDenseNX, 1>(xs, ws, k, ys);
          i += nx;
        }
        r += nw;
      }
    });
  }
}

void MatmulDense(const Tensor& x, const Weight& w, Tensor& y) {
  switch (w.data.dtype()) {
    case DType::bf16: return DenseRun<DenseBF16>(x, w, y);
    case DType::f16: return DenseRun<DenseF16>(x, w, y);
    default: return DenseRun<DenseF32>(x, w, y);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(MatmulDense);

void matmul_dense(const Tensor& x, const Weight& w, Tensor& y) { HWY_DYNAMIC_DISPATCH(MatmulDense)(x, w, y); }

}  // namespace sanctum::ops::cpu
#endif

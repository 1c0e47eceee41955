// Per-target pieces the CPU attention kernels share (causal ops::attention over an f32 cache or a
// stored-format one, and the encoder's full_attention), so that each computes them in the same order
// and gets the same bits. Included after hwy/highway.h inside a foreach_target translation unit
// (Highway's -inl pattern).
#if defined(SANCTUM_OPS_CPU_ATTENTION_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SANCTUM_OPS_CPU_ATTENTION_COMMON_INL_H_
#undef SANCTUM_OPS_CPU_ATTENTION_COMMON_INL_H_
#else
#define SANCTUM_OPS_CPU_ATTENTION_COMMON_INL_H_
#endif

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tensor/dtype.h"

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The sum of v's lanes as a halving tree: lane l + N/2 added to lane l, then the same on the lower
// half, down to one lane. Spelled out (rather than SumOfLanes, whose order is the target's) because
// the transposed score kernels add their per-lane accumulators in exactly this pairing, and a
// score must have the same bits whichever form computed it.
template <class D>
HWY_INLINE float LaneTreeSum(D d, hn::VFromD<D> v) {
#if HWY_TARGET == HWY_SCALAR
  return hn::GetLane(v);
#else
  if constexpr (hn::MaxLanes(d) == 1) {
    return hn::GetLane(v);
  } else {
    const hn::Half<D> dh;
    return LaneTreeSum(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
#endif
}

// q·k: two vector accumulators in order, summed, then the tail.
HWY_INLINE float AttentionDot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, int64_t d) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
  int64_t c = 0;
  for (; c + 2 * N <= d; c += 2 * N) {
    acc0 = hn::MulAdd(hn::LoadU(df, a + c), hn::LoadU(df, b + c), acc0);
    acc1 = hn::MulAdd(hn::LoadU(df, a + c + N), hn::LoadU(df, b + c + N), acc1);
  }
  for (; c + N <= d; c += N) acc0 = hn::MulAdd(hn::LoadU(df, a + c), hn::LoadU(df, b + c), acc0);
  float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
  for (; c < d; ++c) s += a[c] * b[c];
  return s;
}

// AttentionDot of q with four rows, each with exactly its own sums: four chains in flight where one
// would wait on its own FMA and reduction latency.
HWY_INLINE void AttentionDot4(const float* HWY_RESTRICT q, const float* const* rows, int64_t d, float* out) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  decltype(hn::Zero(df)) acc0[4], acc1[4];
  for (int r = 0; r < 4; ++r) acc0[r] = acc1[r] = hn::Zero(df);
  int64_t c = 0;
  for (; c + 2 * N <= d; c += 2 * N) {
    const auto q0 = hn::LoadU(df, q + c), q1 = hn::LoadU(df, q + c + N);
    for (int r = 0; r < 4; ++r) {
      acc0[r] = hn::MulAdd(q0, hn::LoadU(df, rows[r] + c), acc0[r]);
      acc1[r] = hn::MulAdd(q1, hn::LoadU(df, rows[r] + c + N), acc1[r]);
    }
  }
  for (; c + N <= d; c += N) {
    const auto q0 = hn::LoadU(df, q + c);
    for (int r = 0; r < 4; ++r) acc0[r] = hn::MulAdd(q0, hn::LoadU(df, rows[r] + c), acc0[r]);
  }
  for (int r = 0; r < 4; ++r) {
    float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0[r], acc1[r])));
    for (int64_t t = c; t < d; ++t) s += q[t] * rows[r][t];
    out[r] = s;
  }
}

// N floats of a row at p: f32 as it is, bf16 widened.
template <class T>
HWY_INLINE hn::Vec<hn::ScalableTag<float>> LoadRowF32(hn::ScalableTag<float> df, const T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else {
    static_assert(std::is_same_v<T, hwy::bfloat16_t>, "rows are f32 or bf16");
    return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::bfloat16_t, decltype(df)>(), p));
  }
}
template <class T>
HWY_INLINE float RowF32(const T* p) {
  if constexpr (std::is_same_v<T, float>) return *p;
  else return bf16_to_f32(*reinterpret_cast<const uint16_t*>(p));
}

// NV vectors of acc (from column 0 of rows) += p[j] * row j for j < n, the accumulators in registers
// across all the rows.
template <int NV, class T>
HWY_INLINE void AddWeightedRowsChunk(const float* HWY_RESTRICT p, int64_t n, const T* HWY_RESTRICT rows, int64_t stride,
                                     float* HWY_RESTRICT acc) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  decltype(hn::Zero(df)) a[NV];
  for (int v = 0; v < NV; ++v) a[v] = hn::LoadU(df, acc + v * N);
  for (int64_t j = 0; j < n; ++j) {
    const auto pj = hn::Set(df, p[j]);
    const T* row = rows + j * stride;
    for (int v = 0; v < NV; ++v) a[v] = hn::MulAdd(pj, LoadRowF32(df, row + v * N), a[v]);
  }
  for (int v = 0; v < NV; ++v) hn::StoreU(a[v], df, acc + v * N);
}

// acc[c] += p[j] * rows[j * stride + c] for j < n in order, c < d: per element the chain of adding
// one row at a time (an FMA per element of whole vectors, multiply then add in the tail), with the
// accumulators held in registers instead of stored and reloaded at every row.
template <class T>
HWY_INLINE void AddWeightedRows(const float* HWY_RESTRICT p, int64_t n, const T* HWY_RESTRICT rows, int64_t stride, int64_t d,
                                float* HWY_RESTRICT acc) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
  constexpr int kChunk = 8;  // vectors of accumulators at once, with room for the loads
  const int64_t whole = d / N;
  int64_t v0 = 0;
  for (; v0 + kChunk <= whole; v0 += kChunk) AddWeightedRowsChunk<kChunk>(p, n, rows + v0 * N, stride, acc + v0 * N);
  switch (whole - v0) {
    case 7: AddWeightedRowsChunk<7>(p, n, rows + v0 * N, stride, acc + v0 * N); break;
    case 6: AddWeightedRowsChunk<6>(p, n, rows + v0 * N, stride, acc + v0 * N); break;
    case 5: AddWeightedRowsChunk<5>(p, n, rows + v0 * N, stride, acc + v0 * N); break;
    case 4: AddWeightedRowsChunk<4>(p, n, rows + v0 * N, stride, acc + v0 * N); break;
    case 3: AddWeightedRowsChunk<3>(p, n, rows + v0 * N, stride, acc + v0 * N); break;
    case 2: AddWeightedRowsChunk<2>(p, n, rows + v0 * N, stride, acc + v0 * N); break;
    case 1: AddWeightedRowsChunk<1>(p, n, rows + v0 * N, stride, acc + v0 * N); break;
    default: break;
  }
  for (int64_t c = whole * N; c < d; ++c) {
    float s = acc[c];
    for (int64_t j = 0; j < n; ++j) s += p[j] * RowF32(rows + j * stride + c);
    acc[c] = s;
  }
}

// p[j] = exp(p[j] - mx) for j < n, over whole vectors (lanes [n, n rounded up to the vector) are set
// to -inf and give 0, so p needs that room); returns 1 / the sum of the exponentials.
HWY_INLINE float ExpScoresInPlace(float* HWY_RESTRICT p, int64_t n, float mx) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t padded = (n + N - 1) / N * N;
  for (int64_t j = n; j < padded; ++j) p[j] = -INFINITY;
  const auto vm = hn::Set(df, mx);
  auto vsum = hn::Zero(df);
  for (int64_t j = 0; j < padded; j += N) {
    const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, p + j), vm));
    vsum = hn::Add(vsum, e);
    hn::StoreU(e, df, p + j);
  }
  return 1.0f / hn::GetLane(hn::SumOfLanes(df, vsum));
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#endif  // SANCTUM_OPS_CPU_ATTENTION_COMMON_INL_H_

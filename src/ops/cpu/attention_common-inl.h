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

// q·k: two vector accumulators in order, added, their lanes summed as LaneTreeSum pairs them (on
// x86 the order SumOfLanes used here before), then the tail onto that sum.
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
  float s = LaneTreeSum(df, hn::Add(acc0, acc1));
  for (; c < d; ++c) s += a[c] * b[c];
  return s;
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

// LaneTreeSum of a full vector's worth of vectors at once, on fixed-width targets of 1, 4, 8 or 16
// lanes (kTreeSums): v[i] holds the accumulator of key TreeSlot(i), and lane l of the result is
// LaneTreeSum of key l's, with the same pairing and the same operand order at every level, where one
// LaneTreeSum per key spends a shuffle and an add per level on one lane's worth of result.
template <class D>
constexpr bool kTreeSums =
    !HWY_HAVE_SCALABLE && (hn::MaxLanes(D()) == 1 || hn::MaxLanes(D()) == 4 || hn::MaxLanes(D()) == 8 || hn::MaxLanes(D()) == 16);

// The input slot of key m: its index bit-reversed, since each level interleaves the keys it pairs.
constexpr size_t TreeSlot(size_t m, size_t n) {
  size_t r = 0;
  for (size_t bit = 1; bit < n; bit <<= 1, m >>= 1) r = (r << 1) | (m & 1);
  return r;
}

#if HWY_TARGET == HWY_SCALAR || HWY_HAVE_SCALABLE
template <class D>
HWY_INLINE hn::VFromD<D> TreeSums(D d, hn::VFromD<D>* HWY_RESTRICT v) {
  static_assert(hn::MaxLanes(D()) == 1, "scalable vectors sum each key's lanes with LaneTreeSum");
  return v[0];
}
#else
// Adjacent groups of W lanes swapped (W < half the vector).
template <size_t W, class D>
HWY_INLINE hn::VFromD<D> SwapLaneGroups(D d, hn::VFromD<D> v) {
  if constexpr (W == 1) {
    return hn::Shuffle2301(v);
  } else if constexpr (W == 2) {
    return hn::Shuffle1032(v);
  } else {
    static_assert(W == 4 && hn::MaxLanes(D()) == 16, "four-lane groups are 128-bit blocks of a 16-lane vector");
    return hn::SwapAdjacentBlocks(v);
  }
}

// Even groups of W lanes from `even`, odd ones from `odd`.
template <size_t W, class D>
HWY_INLINE hn::VFromD<D> BlendLaneGroups(D d, hn::VFromD<D> odd, hn::VFromD<D> even) {
  if constexpr (W == 1) {
    return hn::OddEven(odd, even);
  } else if constexpr (W == 2) {
    const hn::Repartition<uint64_t, D> du64;
    return hn::BitCast(d, hn::OddEven(hn::BitCast(du64, odd), hn::BitCast(du64, even)));
  } else {
    static_assert(W == 4 && hn::MaxLanes(D()) == 16, "four-lane groups are 128-bit blocks of a 16-lane vector");
    return hn::OddEvenBlocks(odd, even);
  }
}

// One level of the tree over two vectors whose keys hold 2W partial sums each: lane l of a key's
// group plus lane l + W, lower operand first as in LaneTreeSum; p's keys land in the even groups of
// W lanes, q's in the odd ones.
template <size_t W, class D>
HWY_INLINE hn::VFromD<D> TreeMerge(D d, hn::VFromD<D> p, hn::VFromD<D> q) {
  if constexpr (W == hn::MaxLanes(D()) / 2) {
    return hn::Add(hn::ConcatLowerLower(d, q, p), hn::ConcatUpperUpper(d, q, p));
  } else {
    return BlendLaneGroups<W>(d, hn::Add(SwapLaneGroups<W>(d, q), q), hn::Add(p, SwapLaneGroups<W>(d, p)));
  }
}

// Levels W, W / 2, ..., 1 over v[0, 2W); the result in v[0].
template <size_t W, class D>
HWY_INLINE void TreeLevels(D d, hn::VFromD<D>* HWY_RESTRICT v) {
  for (size_t i = 0; i < W; ++i) v[i] = TreeMerge<W>(d, v[2 * i], v[2 * i + 1]);
  if constexpr (W > 1) TreeLevels<W / 2>(d, v);
}

template <class D>
HWY_INLINE hn::VFromD<D> TreeSums(D d, hn::VFromD<D>* HWY_RESTRICT v) {
  static_assert(kTreeSums<D>, "TreeSums needs a fixed-width vector of 4, 8 or 16 lanes");
  TreeLevels<hn::MaxLanes(D()) / 2>(d, v);
  return v[0];
}
#endif

// p[j] = exp(p[j] - mx) for j in [j0, j1), j0 a multiple of the vector; where j1 is the row's end n,
// lanes up to n rounded up to the vector are set to -inf first and give 0 (ExpScoresInPlace's steps,
// one piece of the row at a time).
HWY_INLINE void ExpScoresRange(float* HWY_RESTRICT p, int64_t j0, int64_t j1, int64_t n, float mx) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t end = j1 == n ? (n + N - 1) / N * N : j1;
  for (int64_t j = n; j < end; ++j) p[j] = -INFINITY;
  const auto vm = hn::Set(df, mx);
  for (int64_t j = j0; j < end; j += N) hn::StoreU(hn::Exp(df, hn::Sub(hn::LoadU(df, p + j), vm)), df, p + j);
}

// 1 / the sum of the exponentials ExpScoresRange left in p[0, n): ExpScoresInPlace's sum.
HWY_INLINE float InverseExpSum(const float* HWY_RESTRICT p, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t padded = (n + N - 1) / N * N;
  auto vsum = hn::Zero(df);
  for (int64_t j = 0; j < padded; j += N) vsum = hn::Add(vsum, hn::LoadU(df, p + j));
  return 1.0f / hn::GetLane(hn::SumOfLanes(df, vsum));
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#endif  // SANCTUM_OPS_CPU_ATTENTION_COMMON_INL_H_

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

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

// Per-target q·k for the attention kernels (causal ops::attention and the encoder's full_attention):
// two vector accumulators in order, summed, then the tail. Included after hwy/highway.h inside a
// foreach_target translation unit (Highway's -inl pattern).
#if defined(SANCTUM_OPS_CPU_ATTENTION_DOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SANCTUM_OPS_CPU_ATTENTION_DOT_INL_H_
#undef SANCTUM_OPS_CPU_ATTENTION_DOT_INL_H_
#else
#define SANCTUM_OPS_CPU_ATTENTION_DOT_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#endif  // SANCTUM_OPS_CPU_ATTENTION_DOT_INL_H_

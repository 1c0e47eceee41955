// Softmax per row in f32: max, exp(x - max) with lane sums, then scale by 1/sum.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/softmax.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>

#include "base/thread_pool.h"
#include "ops/cpu/kernels.h"
#include "ops/op_util.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// In place on p[0..d): exp(p - max) / sum. The tail runs as one padded vector so every element goes
// through the same exp. The lanes sum blocks of kSumBlock values in f32 and the blocks meet in f64,
// so the sum's rounding error does not grow with the row: one f32 lane running over a 152k
// vocabulary (19k terms a lane at 8 lanes) drifted by up to ~5e-6 of the sum.
constexpr int64_t kSumBlock = 1024;
HWY_INLINE void SoftmaxRow(float* HWY_RESTRICT p, int64_t d) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t full = d / N * N;
  HWY_ALIGN float tail[hn::MaxLanes(df)];
  auto vmax = hn::Set(df, -INFINITY);
  for (int64_t c = 0; c < full; c += N) vmax = hn::Max(vmax, hn::LoadU(df, p + c));
  float mx = hn::GetLane(hn::MaxOfLanes(df, vmax));
  for (int64_t c = full; c < d; ++c) mx = std::max(mx, p[c]);
  if (mx == -INFINITY) mx = 0.0f;  // a row of -inf: exp gives 0 everywhere, caught below
  const auto vm = hn::Set(df, mx);
  double total = 0.0;
  for (int64_t c0 = 0; c0 < full; c0 += kSumBlock) {
    auto vsum = hn::Zero(df);
    for (int64_t c = c0; c < std::min(full, c0 + kSumBlock); c += N) {
      const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, p + c), vm));
      vsum = hn::Add(vsum, e);
      hn::StoreU(e, df, p + c);
    }
    total += hn::GetLane(hn::SumOfLanes(df, vsum));
  }
  if (full < d) {
    for (int64_t t = 0; t < N; ++t) tail[t] = full + t < d ? p[full + t] : -INFINITY;
    const auto e = hn::Exp(df, hn::Sub(hn::Load(df, tail), vm));
    total += hn::GetLane(hn::SumOfLanes(df, e));
    hn::Store(e, df, tail);
    for (int64_t t = 0; full + t < d; ++t) p[full + t] = tail[t];
  }
  const float sum = static_cast<float>(total);
  const auto inv = hn::Set(df, 1.0f / sum);
  int64_t c = 0;
  for (; c < full; c += N) hn::StoreU(hn::Mul(hn::LoadU(df, p + c), inv), df, p + c);
  for (; c < d; ++c) p[c] *= 1.0f / sum;
}

void SoftmaxRows(Tensor& x, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) SoftmaxRow(detail::row_ptr<float>(x, r), x.dim(-1));
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(SoftmaxRows);

void softmax(Tensor& x) {
  const int64_t d = x.dim(-1), rows = detail::outer_rows(x);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1));
  compute_pool().parallel_for(rows, grain, [&](int64_t r0, int64_t r1) { HWY_DYNAMIC_DISPATCH(SoftmaxRows)(x, r0, r1); });
}

}  // namespace sanctum::ops::cpu
#endif

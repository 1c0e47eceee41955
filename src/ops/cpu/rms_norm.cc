// RMSNorm per row: sum of squares in f32 lanes (fixed order), then x * inv_rms * (w + offset).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/rms_norm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "ops/cpu/convert-inl.h"

#include <cmath>
#include <vector>

#include "base/thread_pool.h"
#include "ops/cpu/kernels.h"
#include "ops/op_util.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {

void RmsNormRows(const Tensor& x, const float* HWY_RESTRICT w, float eps, Tensor& out, int64_t r0, int64_t r1) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), d = x.dim(-1);
  for (int64_t r = r0; r < r1; ++r) {
    const float* HWY_RESTRICT xr = detail::row_ptr<const float>(x, r);
    float* o = detail::row_ptr<float>(out, r);
    auto ss = hn::Zero(df);
    int64_t c = 0;
    for (; c + N <= d; c += N) {
      const auto v = hn::LoadU(df, xr + c);
      ss = hn::MulAdd(v, v, ss);
    }
    float sum = hn::GetLane(hn::SumOfLanes(df, ss));
    for (int64_t t = c; t < d; ++t) sum += xr[t] * xr[t];
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(d) + eps);
    const auto vinv = hn::Set(df, inv);
    for (c = 0; c + N <= d; c += N) hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, xr + c), vinv), hn::LoadU(df, w + c)), df, o + c);
    for (; c < d; ++c) o[c] = xr[c] * inv * w[c];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(RmsNormRows);

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, float weight_offset) {
  const int64_t d = x.dim(-1), rows = detail::outer_rows(x);
  std::vector<float> w(static_cast<size_t>(d));  // (d) weight + offset in f32
  for (int64_t c = 0; c < d; ++c) w[static_cast<size_t>(c)] = load_as_f32(weight.raw(), weight.dtype(), c) + weight_offset;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1));
  compute_pool().parallel_for(rows, grain,
                              [&](int64_t r0, int64_t r1) { HWY_DYNAMIC_DISPATCH(RmsNormRows)(x, w.data(), eps, out, r0, r1); });
}

}  // namespace sanctum::ops::cpu
#endif

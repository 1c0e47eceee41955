// GELU in f32 over rows, split across the compute pool. The tanh form in Highway vectors (Tanh of
// hwy/contrib/math, a few ulp); the erf form with std::erf (Highway has no erf; only the patch
// merger uses it, on a quarter of the rows).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/gelu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#include <cmath>

#include "base/thread_pool.h"
#include "ops/cpu/encoder_kernels.h"
#include "ops/op_util.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class DF, class V>
HWY_INLINE V GeluTanh(DF df, V x) {
  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  const auto inner = hn::Mul(hn::Set(df, 0.79788456080286536f), hn::MulAdd(hn::Mul(hn::Set(df, 0.044715f), hn::Mul(x, x)), x, x));
  return hn::Mul(hn::Mul(hn::Set(df, 0.5f), x), hn::Add(hn::Set(df, 1.0f), hn::Tanh(df, inner)));
}

void GeluTanhRows(const Tensor& x, Tensor& out, int64_t r0, int64_t r1) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), d = x.dim(-1);
  HWY_ALIGN float tail[hn::MaxLanes(df)];
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = detail::row_ptr<const float>(x, r);
    float* o = detail::row_ptr<float>(out, r);
    int64_t c = 0;
    for (; c + N <= d; c += N) hn::StoreU(GeluTanh(df, hn::LoadU(df, xr + c)), df, o + c);
    if (c < d) {  // tail through one padded vector, so every element takes the same path
      for (int64_t t = 0; t < N; ++t) tail[t] = c + t < d ? xr[c + t] : 0.0f;
      hn::Store(GeluTanh(df, hn::Load(df, tail)), df, tail);
      for (int64_t t = 0; c + t < d; ++t) o[c + t] = tail[t];
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(GeluTanhRows);

void gelu(const Tensor& x, Tensor& out, GeluKind kind) {
  const int64_t d = x.dim(-1), rows = detail::outer_rows(x);
  compute_pool().parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    if (kind == GeluKind::tanh) return HWY_DYNAMIC_DISPATCH(GeluTanhRows)(x, out, r0, r1);
    constexpr float kSqrtHalf = 0.70710678118654752f;
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = detail::row_ptr<const float>(x, r);
      float* o = detail::row_ptr<float>(out, r);
      for (int64_t c = 0; c < d; ++c) o[c] = 0.5f * xr[c] * (1.0f + std::erf(xr[c] * kSqrtHalf));
    }
  });
}

}  // namespace sanctum::ops::cpu
#endif

// silu(gate) * up in f32: gate / (1 + exp(-gate)) * up.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/activation.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#include "base/thread_pool.h"
#include "ops/cpu/kernels.h"
#include "ops/op_util.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class DF, class V>
HWY_INLINE V SiluMul(DF df, V g, V u) {
  // exp(-g) is clamped: Highway's Exp is specified up to +104 and silu(g < -88) is 0 in f32 anyway.
  const auto e = hn::Exp(df, hn::Min(hn::Neg(g), hn::Set(df, 88.0f)));
  return hn::Mul(hn::Div(g, hn::Add(hn::Set(df, 1.0f), e)), u);
}

void SiluMulRows(const Tensor& gate, const Tensor& up, Tensor& out, int64_t r0, int64_t r1) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), d = gate.dim(-1);
  HWY_ALIGN float tg[hn::MaxLanes(df)];
  HWY_ALIGN float tu[hn::MaxLanes(df)];
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = detail::row_ptr<const float>(gate, r);
    const float* u = detail::row_ptr<const float>(up, r);
    float* o = detail::row_ptr<float>(out, r);
    int64_t c = 0;
    for (; c + N <= d; c += N) hn::StoreU(SiluMul(df, hn::LoadU(df, g + c), hn::LoadU(df, u + c)), df, o + c);
    if (c < d) {  // tail through one padded vector, so every element takes the same path
      for (int64_t t = 0; t < N; ++t) {
        tg[t] = c + t < d ? g[c + t] : 0.0f;
        tu[t] = c + t < d ? u[c + t] : 0.0f;
      }
      hn::Store(SiluMul(df, hn::Load(df, tg), hn::Load(df, tu)), df, tg);
      for (int64_t t = 0; c + t < d; ++t) o[c + t] = tg[t];
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(SiluMulRows);

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  const int64_t d = gate.dim(-1), rows = detail::outer_rows(gate);
  if (rows == 1 && d >= 8192) {  // one long row (decode MLP): split it into column slices
    compute_pool().parallel_for(d, 4096, [&](int64_t c0, int64_t c1) {
      const Tensor g = gate.ndim() == 1 ? gate.slice(0, c0, c1) : gate.slice(-1, c0, c1);
      const Tensor u = up.ndim() == 1 ? up.slice(0, c0, c1) : up.slice(-1, c0, c1);
      Tensor o = out.ndim() == 1 ? out.slice(0, c0, c1) : out.slice(-1, c0, c1);
      HWY_DYNAMIC_DISPATCH(SiluMulRows)(g, u, o, 0, 1);
    });
    return;
  }
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1));
  compute_pool().parallel_for(rows, grain, [&](int64_t r0, int64_t r1) { HWY_DYNAMIC_DISPATCH(SiluMulRows)(gate, up, out, r0, r1); });
}

}  // namespace sanctum::ops::cpu
#endif

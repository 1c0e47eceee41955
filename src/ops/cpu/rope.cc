// RoPE, rotate-half layout: per token, cos/sin of float(pos) * inv_freq (times the YaRN magnitude)
// once, then every head rotates its pairs (j, j + rotary_dim/2) with them.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/rope.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <cmath>
#include <vector>

#include "base/thread_pool.h"
#include "ops/cpu/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void RopeTokens(Tensor& x, const int32_t* positions, const RopeTable& table, int64_t t0, int64_t t1) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), half = table.rotary_dim() / 2, heads = x.dim(1);
  const float mag = table.magnitude();
  const float* inv_freq = table.inv_freq().data();
  std::vector<float> cs(static_cast<size_t>(2 * half));  // (2, half): cos then sin
  float* cosv = cs.data();
  float* sinv = cs.data() + half;
  for (int64_t i = t0; i < t1; ++i) {
    const float pos = static_cast<float>(positions[i]);
    for (int64_t j = 0; j < half; ++j) {
      const float angle = pos * inv_freq[j];
      cosv[j] = std::cos(angle) * mag;
      sinv[j] = std::sin(angle) * mag;
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* HWY_RESTRICT v = x.data<float>() + i * x.stride(0) + h * x.stride(1);
      int64_t j = 0;
      for (; j + N <= half; j += N) {
        const auto a = hn::LoadU(df, v + j), b = hn::LoadU(df, v + j + half);
        const auto c = hn::LoadU(df, cosv + j), s = hn::LoadU(df, sinv + j);
        hn::StoreU(hn::NegMulAdd(b, s, hn::Mul(a, c)), df, v + j);      // a c - b s
        hn::StoreU(hn::MulAdd(a, s, hn::Mul(b, c)), df, v + j + half);  // b c + a s
      }
      for (; j < half; ++j) {
        const float a = v[j], b = v[j + half];
        v[j] = std::fma(-b, sinv[j], a * cosv[j]);
        v[j + half] = std::fma(a, sinv[j], b * cosv[j]);
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(RopeTokens);

void rope(Tensor& x, std::span<const int32_t> positions, const RopeTable& table) {
  const int64_t n = x.dim(0);
  compute_pool().parallel_for(n, 16, [&](int64_t t0, int64_t t1) { HWY_DYNAMIC_DISPATCH(RopeTokens)(x, positions.data(), table, t0, t1); });
}

}  // namespace sanctum::ops::cpu
#endif

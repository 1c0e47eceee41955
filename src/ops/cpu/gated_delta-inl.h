// Shared by the GatedDeltaNet CPU kernels (gated_delta.cc: conv, norm, token-by-token recurrence;
// gated_delta_chunked.cc: the chunked form). The first part is plain C++; the second is per target
// (Highway's -inl pattern: included after hwy/highway.h inside a foreach_target translation unit).
#ifndef SANCTUM_OPS_CPU_GATED_DELTA_COMMON_
#define SANCTUM_OPS_CPU_GATED_DELTA_COMMON_
#include <cmath>
#include <vector>

#include "ops/gated_delta.h"
#include "ops/op_util.h"
#include "tensor/tensor.h"
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace sanctum::ops::cpu {

// What the recurrence kernels share (one call of gated_delta_rule).
struct GdnArgs {
  const Tensor *q, *k, *v, *a, *b;
  const float* decay_rate;  // (Hv) exp(A_log)
  const float* dt_bias;     // (Hv)
  GatedDeltaShape shape;
  float* state;  // (Hv, Dv, Dk)
  Tensor* out;
};

// Per value head exp(A_log) and dt_bias as f32 (they may be stored in half precision).
inline void per_head_params(const Tensor& a_log, const Tensor& dt_bias, int64_t hv, std::vector<float>& rate, std::vector<float>& bias) {
  rate.resize(static_cast<size_t>(hv));
  bias.resize(static_cast<size_t>(hv));
  for (int64_t h = 0; h < hv; ++h) {
    rate[static_cast<size_t>(h)] = std::exp(load_as_f32(a_log.raw(), a_log.dtype(), h));
    bias[static_cast<size_t>(h)] = load_as_f32(dt_bias.raw(), dt_bias.dtype(), h);
  }
}

// Flush-to-zero and denormals-are-zero for the duration of a kernel task (on this thread). Strong
// decays push products through the denormal range, where x86 cores without FTZ take a microcode
// assist per instruction (hundreds of cycles on Intel); values below 1e-38 carry nothing here.
class FlushDenormals {
 public:
#if defined(__x86_64__) || defined(__i386__)
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~FlushDenormals() { _mm_setcsr(saved_); }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  unsigned saved_;
#endif
};

}  // namespace sanctum::ops::cpu
#endif  // SANCTUM_OPS_CPU_GATED_DELTA_COMMON_

#if defined(SANCTUM_OPS_CPU_GATED_DELTA_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SANCTUM_OPS_CPU_GATED_DELTA_INL_H_
#undef SANCTUM_OPS_CPU_GATED_DELTA_INL_H_
#else
#define SANCTUM_OPS_CPU_GATED_DELTA_INL_H_
#endif

#include <algorithm>
#include <cstring>

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Scratch rows are padded with zeros to a multiple of kPad floats (at least the widest x86 vector),
// so vector loops over them need no tails and the padding stays zero through every product.
constexpr int64_t kPad = 16;
inline int64_t Padded(int64_t n) { return (n + kPad - 1) / kPad * kPad; }

// Zero-filled aligned scratch of n floats.
inline hwy::AlignedFreeUniquePtr<float[]> Scratch(int64_t n) {
  auto p = hwy::AllocateAligned<float>(static_cast<size_t>(std::max<int64_t>(n, 1)));
  std::memset(p.get(), 0, static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float));
  return p;
}

inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch's softplus (threshold 20); mlx's logaddexp(x, 0) agrees to rounding.
inline float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Per-token log decay of value head h: -exp(A_log) * softplus(a + dt_bias).
inline float LogDecay(const GdnArgs& p, int64_t t, int64_t h) {
  return -p.decay_rate[h] * Softplus(detail::row_ptr<const float>(*p.a, t)[h] + p.dt_bias[h]);
}
inline float Beta(const GdnArgs& p, int64_t t, int64_t h) { return Sigmoid(detail::row_ptr<const float>(*p.b, t)[h]); }

// exp(x), flushed to 0 below -80 (exp(-80) ~ 1.8e-35): keeps denormals out of the products.
template <class DF>
HWY_INLINE hn::Vec<DF> ExpFlush(DF df, hn::Vec<DF> x) {
  const auto lo = hn::Set(df, -80.0f);
  return hn::IfThenZeroElse(hn::Lt(x, lo), hn::Exp(df, hn::Max(x, lo)));
}
inline float ExpFlush(float x) { return x < -80.0f ? 0.0f : std::exp(x); }

// Sum over d of a[i] * b[i]: lanes in vector order, then the tail.
HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, int64_t d) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto acc = hn::Zero(df);
  int64_t c = 0;
  for (; c + N <= d; c += N) acc = hn::MulAdd(hn::LoadU(df, a + c), hn::LoadU(df, b + c), acc);
  float s = hn::GetLane(hn::SumOfLanes(df, acc));
  for (; c < d; ++c) s += a[c] * b[c];
  return s;
}

// scale / sqrt(sum x^2 + 1e-6): the factor L2Normalize applies.
HWY_INLINE float L2NormScale(const float* HWY_RESTRICT x, int64_t d, float scale) { return scale / std::sqrt(Dot(x, x, d) + 1e-6f); }

// out[0..d) = x * scale / sqrt(sum x^2 + 1e-6); out[d..dp) = 0.
HWY_INLINE void L2Normalize(const float* HWY_RESTRICT x, int64_t d, int64_t dp, float scale, float* HWY_RESTRICT out) {
  const float inv = L2NormScale(x, d, scale);
  for (int64_t c = 0; c < d; ++c) out[c] = x[c] * inv;
  for (int64_t c = d; c < dp; ++c) out[c] = 0.0f;
}

// Brings [p, p + count) floats towards L1, one request per cache line.
HWY_INLINE void Prefetch(const float* p, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) hwy::Prefetch(p + i);
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#endif  // SANCTUM_OPS_CPU_GATED_DELTA_INL_H_

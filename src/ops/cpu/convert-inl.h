// Per-target helpers shared by the CPU kernels: loading f32/bf16/f16 as f32 vectors.
// Included after hwy/highway.h inside a foreach_target translation unit (Highway's -inl pattern).
#if defined(SANCTUM_OPS_CPU_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SANCTUM_OPS_CPU_CONVERT_INL_H_
#undef SANCTUM_OPS_CPU_CONVERT_INL_H_
#else
#define SANCTUM_OPS_CPU_CONVERT_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "tensor/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Lanes(df) bf16 values (raw bits) at p, widened to f32 exactly.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadBF16(DF df, const uint16_t* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}

// Lanes(df) f16 values (raw bits) at p, widened to f32 exactly.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF16(DF df, const uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<hwy::float16_t, DF> df16;
  return hn::PromoteTo(df, hn::LoadU(df16, reinterpret_cast<const hwy::float16_t*>(p)));
}

template <class DF>
HWY_INLINE hn::Vec<DF> LoadAsF32(DF df, const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::bf16: return LoadBF16(df, static_cast<const uint16_t*>(base) + i);
    case DType::f16: return LoadF16(df, static_cast<const uint16_t*>(base) + i);
    default: return hn::LoadU(df, static_cast<const float*>(base) + i);
  }
}

// dst[0..n) = src[0..n) as f32.
HWY_INLINE void ConvertToF32(const void* src, DType dtype, float* HWY_RESTRICT dst, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(LoadAsF32(df, src, dtype, i), df, dst + i);
  for (; i < n; ++i) dst[i] = load_as_f32(src, dtype, i);
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard

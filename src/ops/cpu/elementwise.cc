// Elementwise f32 ops (exact per element, so any split gives the same bits).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/elementwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "ops/cpu/convert-inl.h"

#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "ops/cpu/kernels.h"
#include "ops/op_util.h"
#include "ops/ref/elementwise.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {

// o = a + b over n elements.
void AddSpan(const float* a, const float* b, float* o, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t c = 0;
  for (; c + N <= n; c += N) hn::StoreU(hn::Add(hn::LoadU(df, a + c), hn::LoadU(df, b + c)), df, o + c);
  for (; c < n; ++c) o[c] = a[c] + b[c];
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(AddSpan);

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t d = a.dim(-1), rows = detail::outer_rows(a);
  if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous()) {  // one flat span
    const int64_t n = rows * d;
    compute_pool().parallel_for(n, 1 << 15, [&](int64_t i0, int64_t i1) {
      HWY_DYNAMIC_DISPATCH(AddSpan)(a.data<const float>() + i0, b.data<const float>() + i0, out.data<float>() + i0, i1 - i0);
    });
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    HWY_DYNAMIC_DISPATCH(AddSpan)(detail::row_ptr<const float>(a, r), detail::row_ptr<const float>(b, r), detail::row_ptr<float>(out, r),
                                  d);
}

void add_bias(Tensor& y, const Tensor& bias) {
  const int64_t d = y.dim(-1), rows = detail::outer_rows(y);
  std::vector<float> b(static_cast<size_t>(d));  // (m) bias in f32
  for (int64_t c = 0; c < d; ++c) b[static_cast<size_t>(c)] = load_as_f32(bias.raw(), bias.dtype(), c);
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = detail::row_ptr<float>(y, r);
    HWY_DYNAMIC_DISPATCH(AddSpan)(yr, b.data(), yr, d);
  }
}

void copy(const Tensor& src, Tensor& dst) {
  const bool rows_contiguous = src.ndim() >= 1 && (src.dim(-1) <= 1 || src.stride(-1) == 1) && (dst.dim(-1) <= 1 || dst.stride(-1) == 1);
  if (!rows_contiguous) return ref::copy(src, dst);
  const int64_t rows = detail::outer_rows(src);
  const size_t row_bytes = static_cast<size_t>(src.dim(-1)) * dtype_size(src.dtype());
  for (int64_t r = 0; r < rows; ++r) std::memmove(detail::row_raw(dst, r), detail::row_raw(src, r), row_bytes);
}

}  // namespace sanctum::ops::cpu
#endif

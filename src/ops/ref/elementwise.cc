#include "ops/ref/elementwise.h"

#include <cstring>

#include "ops/op_util.h"

namespace sanctum::ops::ref {

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t d = a.dim(-1), rows = detail::outer_rows(a);
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = detail::row_ptr<const float>(a, r);
    const float* br = detail::row_ptr<const float>(b, r);
    float* o = detail::row_ptr<float>(out, r);
    for (int64_t c = 0; c < d; ++c) o[c] = ar[c] + br[c];
  }
}

void add_bias(Tensor& y, const Tensor& bias) {
  const int64_t d = y.dim(-1), rows = detail::outer_rows(y);
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = detail::row_ptr<float>(y, r);
    for (int64_t c = 0; c < d; ++c) yr[c] += load_as_f32(bias.raw(), bias.dtype(), c * bias.stride(0));
  }
}

// Element by element with full strides (the last dim may be strided too).
void copy(const Tensor& src, Tensor& dst) {
  const int64_t d = src.ndim() ? src.dim(-1) : 1, rows = detail::outer_rows(src);
  const int64_t ss = src.ndim() ? src.stride(-1) : 1, ds = dst.ndim() ? dst.stride(-1) : 1;
  const size_t es = dtype_size(src.dtype());
  for (int64_t r = 0; r < rows; ++r) {
    const char* s = static_cast<const char*>(detail::row_raw(src, r));
    char* o = static_cast<char*>(detail::row_raw(dst, r));
    for (int64_t c = 0; c < d; ++c) std::memcpy(o + c * ds * static_cast<int64_t>(es), s + c * ss * static_cast<int64_t>(es), es);
  }
}

}  // namespace sanctum::ops::ref

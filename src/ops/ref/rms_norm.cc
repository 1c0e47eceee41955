#include "ops/ref/rms_norm.h"

#include <cmath>

#include "ops/op_util.h"

namespace sanctum::ops::ref {

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, float weight_offset) {
  const int64_t d = x.dim(-1), rows = detail::outer_rows(x);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = detail::row_ptr<const float>(x, r);
    float* o = detail::row_ptr<float>(out, r);
    double ss = 0.0;
    for (int64_t c = 0; c < d; ++c) ss += static_cast<double>(xr[c]) * xr[c];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    for (int64_t c = 0; c < d; ++c) {
      const double wc = static_cast<double>(load_as_f32(weight.raw(), weight.dtype(), c * weight.stride(0))) + weight_offset;
      o[c] = static_cast<float>(xr[c] * inv * wc);
    }
  }
}

}  // namespace sanctum::ops::ref

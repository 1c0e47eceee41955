#include "ops/ref/layer_norm.h"

#include <cmath>

#include "ops/op_util.h"

namespace sanctum::ops::ref {

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) {
  const int64_t d = x.dim(-1), rows = detail::outer_rows(x);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = detail::row_ptr<const float>(x, r);
    float* o = detail::row_ptr<float>(out, r);
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < d; ++c) mean += xr[c];
    mean /= static_cast<double>(d);
    for (int64_t c = 0; c < d; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(d) + eps);
    for (int64_t c = 0; c < d; ++c) {
      const double w = load_as_f32(weight.raw(), weight.dtype(), c * weight.stride(0));
      const double b = load_as_f32(bias.raw(), bias.dtype(), c * bias.stride(0));
      o[c] = static_cast<float>((xr[c] - mean) * inv * w + b);
    }
  }
}

}  // namespace sanctum::ops::ref

#include "ops/ref/gelu.h"

#include <cmath>
#include <numbers>

#include "ops/op_util.h"

namespace sanctum::ops::ref {

void gelu(const Tensor& x, Tensor& out, GeluKind kind) {
  const int64_t d = x.dim(-1), rows = detail::outer_rows(x);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = detail::row_ptr<const float>(x, r);
    float* o = detail::row_ptr<float>(out, r);
    for (int64_t c = 0; c < d; ++c) {
      const double v = xr[c];
      const double g = kind == GeluKind::erf ? 0.5 * v * (1.0 + std::erf(v / std::numbers::sqrt2))
                                             : 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
      o[c] = static_cast<float>(g);
    }
  }
}

}  // namespace sanctum::ops::ref

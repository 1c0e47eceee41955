#include "ops/ref/softmax.h"

#include <cmath>

#include "ops/op_util.h"

namespace sanctum::ops::ref {

void softmax(Tensor& x) {
  const int64_t d = x.dim(-1), rows = detail::outer_rows(x);
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = detail::row_ptr<float>(x, r);
    float mx = -INFINITY;
    for (int64_t c = 0; c < d; ++c) mx = std::max(mx, xr[c]);
    double sum = 0.0;
    for (int64_t c = 0; c < d; ++c) sum += std::exp(static_cast<double>(xr[c]) - mx);
    for (int64_t c = 0; c < d; ++c) xr[c] = static_cast<float>(std::exp(static_cast<double>(xr[c]) - mx) / sum);
  }
}

}  // namespace sanctum::ops::ref

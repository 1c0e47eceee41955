#include "ops/ref/activation.h"

#include <cmath>

#include "ops/op_util.h"

namespace sanctum::ops::ref {

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  const int64_t d = gate.dim(-1), rows = detail::outer_rows(gate);
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = detail::row_ptr<const float>(gate, r);
    const float* u = detail::row_ptr<const float>(up, r);
    float* o = detail::row_ptr<float>(out, r);
    for (int64_t c = 0; c < d; ++c) {
      const double gc = g[c];
      o[c] = static_cast<float>(gc / (1.0 + std::exp(-gc)) * u[c]);
    }
  }
}

}  // namespace sanctum::ops::ref

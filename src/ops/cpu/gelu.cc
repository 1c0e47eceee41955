// GELU in f32 over rows, split across the compute pool.
#include <cmath>

#include "base/thread_pool.h"
#include "ops/cpu/encoder_kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops::cpu {

void gelu(const Tensor& x, Tensor& out, GeluKind kind) {
  const int64_t d = x.dim(-1), rows = detail::outer_rows(x);
  constexpr float kSqrtHalf = 0.70710678118654752f, kSqrtTwoOverPi = 0.79788456080286536f;
  compute_pool().parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = detail::row_ptr<const float>(x, r);
      float* o = detail::row_ptr<float>(out, r);
      if (kind == GeluKind::erf) {
        for (int64_t c = 0; c < d; ++c) o[c] = 0.5f * xr[c] * (1.0f + std::erf(xr[c] * kSqrtHalf));
      } else {
        for (int64_t c = 0; c < d; ++c) {
          const float v = xr[c];
          o[c] = 0.5f * v * (1.0f + std::tanh(kSqrtTwoOverPi * (v + 0.044715f * v * v * v)));
        }
      }
    }
  });
}

}  // namespace sanctum::ops::cpu

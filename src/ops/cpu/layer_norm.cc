// LayerNorm in f32, one row per work item: mean, then the mean of squared deviations (two passes,
// as torch does, rather than E[x^2] - mean^2, which cancels badly for rows far from zero).
#include <cmath>
#include <vector>

#include "base/thread_pool.h"
#include "ops/cpu/encoder_kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops::cpu {

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) {
  const int64_t d = x.dim(-1), rows = detail::outer_rows(x);
  std::vector<float> w(static_cast<size_t>(d)), b(static_cast<size_t>(d));
  for (int64_t c = 0; c < d; ++c) {
    w[static_cast<size_t>(c)] = load_as_f32(weight.raw(), weight.dtype(), c * weight.stride(0));
    b[static_cast<size_t>(c)] = load_as_f32(bias.raw(), bias.dtype(), c * bias.stride(0));
  }
  compute_pool().parallel_for(rows, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = detail::row_ptr<const float>(x, r);
      float* o = detail::row_ptr<float>(out, r);
      float sum = 0.0f;
      for (int64_t c = 0; c < d; ++c) sum += xr[c];
      const float mean = sum / static_cast<float>(d);
      float ss = 0.0f;
      for (int64_t c = 0; c < d; ++c) ss += (xr[c] - mean) * (xr[c] - mean);
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
      for (int64_t c = 0; c < d; ++c) o[c] = (xr[c] - mean) * inv * w[static_cast<size_t>(c)] + b[static_cast<size_t>(c)];
    }
  });
}

}  // namespace sanctum::ops::cpu

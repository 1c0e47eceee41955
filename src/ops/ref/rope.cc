#include "ops/ref/rope.h"

#include <cmath>
#include <vector>

#include "ops/op_util.h"

namespace sanctum::ops::ref {

// The angle is float(position) * inv_freq in f32, as mlx and transformers form it; cos/sin of that
// f32 angle are then taken in double.
void rope(Tensor& x, std::span<const int32_t> positions, const RopeTable& table) {
  const int64_t n = x.dim(0), heads = x.dim(1), half = table.rotary_dim() / 2;
  const double mag = table.magnitude();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x.data<float>() + i * x.stride(0) + h * x.stride(1);
      for (int64_t j = 0; j < half; ++j) {
        const float angle = static_cast<float>(positions[static_cast<size_t>(i)]) * table.inv_freq()[static_cast<size_t>(j)];
        const double c = std::cos(static_cast<double>(angle)) * mag, s = std::sin(static_cast<double>(angle)) * mag;
        const double a = v[j], b = v[j + half];
        v[j] = static_cast<float>(a * c - b * s);
        v[j + half] = static_cast<float>(b * c + a * s);
      }
    }
  }
}

}  // namespace sanctum::ops::ref

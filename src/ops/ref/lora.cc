#include "ops/ref/lora.h"

#include <vector>

#include "ops/op_util.h"

namespace sanctum::ops::ref {

void lora_add(const Tensor& x, const Tensor& a, const Tensor& b, float scale, Tensor& y) {
  const int64_t n = x.dim(0), in = x.dim(1), rank = a.dim(0), out = b.dim(0);
  std::vector<double> low(static_cast<size_t>(rank));
  for (int64_t r = 0; r < n; ++r) {
    const void* xr = detail::row_raw(x, r);
    for (int64_t k = 0; k < rank; ++k) {
      double sum = 0;
      for (int64_t i = 0; i < in; ++i) sum += static_cast<double>(a.data<float>()[k * in + i]) * load_as_f32(xr, x.dtype(), i);
      low[static_cast<size_t>(k)] = sum;
    }
    auto* yr = static_cast<float*>(detail::row_raw(y, r));
    for (int64_t j = 0; j < out; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < rank; ++k) sum += static_cast<double>(b.data<float>()[j * rank + k]) * low[static_cast<size_t>(k)];
      yr[j] = static_cast<float>(yr[j] + scale * sum);
    }
  }
}

}  // namespace sanctum::ops::ref

#include "ops/ref/full_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sanctum::ops::ref {

void full_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out) {
  const int64_t n = q.dim(0), heads = q.dim(1), d = q.dim(2), m = k.dim(0), group = heads / k.dim(1);
  std::vector<double> p(static_cast<size_t>(m)), acc(static_cast<size_t>(d));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const float* qi = q.data<float>() + i * q.stride(0) + h * q.stride(1);
      double mx = -INFINITY;
      for (int64_t j = 0; j < m; ++j) {
        const float* kj = k.data<float>() + j * k.stride(0) + (h / group) * k.stride(1);
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(qi[c]) * kj[c];
        p[static_cast<size_t>(j)] = dot * scale;
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < m; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < m; ++j) {
        const float* vj = v.data<float>() + j * v.stride(0) + (h / group) * v.stride(1);
        for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += p[static_cast<size_t>(j)] * vj[c];
      }
      float* o = out.data<float>() + i * out.stride(0) + h * out.stride(1);
      for (int64_t c = 0; c < d; ++c) o[c] = static_cast<float>(acc[static_cast<size_t>(c)] / sum);
    }
}

}  // namespace sanctum::ops::ref

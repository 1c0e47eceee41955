#include "ops/ref/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sanctum::ops::ref {

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, float scale, Tensor& out) {
  const int64_t n = q.dim(0), n_heads = q.dim(1), head_dim = q.dim(2), n_kv_heads = k.dim(1);
  const int64_t group = n_heads / n_kv_heads;
  std::vector<double> p;
  std::vector<double> acc(static_cast<size_t>(head_dim));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t n_keys = q_pos0 + i + 1;
    p.assign(static_cast<size_t>(n_keys), 0.0);
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t kvh = h / group;
      const float* qi = q.data<float>() + i * q.stride(0) + h * q.stride(1);
      double mx = -INFINITY;
      for (int64_t j = 0; j < n_keys; ++j) {
        const float* kj = k.data<float>() + j * k.stride(0) + kvh * k.stride(1);
        double dot = 0.0;
        for (int64_t d = 0; d < head_dim; ++d) dot += static_cast<double>(qi[d]) * kj[d];
        p[static_cast<size_t>(j)] = dot * scale;
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < n_keys; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < n_keys; ++j) {
        const float* vj = v.data<float>() + j * v.stride(0) + kvh * v.stride(1);
        for (int64_t d = 0; d < head_dim; ++d) acc[static_cast<size_t>(d)] += p[static_cast<size_t>(j)] * vj[d];
      }
      float* o = out.data<float>() + i * out.stride(0) + h * out.stride(1);
      for (int64_t d = 0; d < head_dim; ++d) o[d] = static_cast<float>(acc[static_cast<size_t>(d)] / sum);
    }
  }
}

}  // namespace sanctum::ops::ref

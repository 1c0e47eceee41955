// Bidirectional attention, one (query, head) pair per work item, two-pass softmax in f32: a pair's
// result depends only on its own inputs, whatever the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/thread_pool.h"
#include "ops/cpu/encoder_kernels.h"

namespace sanctum::ops::cpu {

void full_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out) {
  const int64_t n = q.dim(0), heads = q.dim(1), d = q.dim(2), m = k.dim(0), group = heads / k.dim(1);
  compute_pool().parallel_for(n * heads, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> p(static_cast<size_t>(m)), acc(static_cast<size_t>(d));
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t i = item / heads, h = item % heads, kvh = h / group;
      const float* qi = q.data<const float>() + i * q.stride(0) + h * q.stride(1);
      float mx = -INFINITY;
      for (int64_t j = 0; j < m; ++j) {
        const float* kj = k.data<const float>() + j * k.stride(0) + kvh * k.stride(1);
        float s = 0.0f;
        for (int64_t c = 0; c < d; ++c) s += qi[c] * kj[c];
        p[static_cast<size_t>(j)] = s * scale;
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < m; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < m; ++j) {
        const float* vj = v.data<const float>() + j * v.stride(0) + kvh * v.stride(1);
        const float pj = p[static_cast<size_t>(j)];
        for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += pj * vj[c];
      }
      float* o = out.data<float>() + i * out.stride(0) + h * out.stride(1);
      const float inv = 1.0f / sum;
      for (int64_t c = 0; c < d; ++c) o[c] = acc[static_cast<size_t>(c)] * inv;
    }
  });
}

}  // namespace sanctum::ops::cpu

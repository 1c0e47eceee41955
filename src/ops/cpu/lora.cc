#include "ops/cpu/lora.h"

#include <algorithm>
#include <array>
#include <vector>

#include "base/thread_pool.h"
#include "ops/op_util.h"

namespace sanctum::ops::cpu {

namespace {

// Σ p[i] q[i] in eight interleaved partial sums, which the compiler keeps in one vector register
// (the adapter's A rows and B rows are short: the rank, or one model dimension).
float dot(const float* p, const float* q, int64_t n) {
  std::array<float, 8> acc{};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[static_cast<size_t>(l)] += p[i + l] * q[i + l];
  float sum = 0.0f;
  for (; i < n; ++i) sum += p[i] * q[i];
  for (float v : acc) sum += v;
  return sum;
}

}  // namespace

void lora_add(const Tensor& x, const Tensor& a, const Tensor& b, float scale, Tensor& y) {
  const int64_t n = x.dim(0), in = x.dim(1), rank = a.dim(0), out = b.dim(0);
  const float* a_data = a.data<float>();
  const float* b_data = b.data<float>();
  // bf16 input rows widened once: (n, in) f32.
  std::vector<float> wide;
  if (x.dtype() == DType::bf16) {
    wide.resize(static_cast<size_t>(n * in));
    for (int64_t r = 0; r < n; ++r) {
      const auto* bits = static_cast<const uint16_t*>(detail::row_raw(x, r));
      for (int64_t i = 0; i < in; ++i) wide[static_cast<size_t>(r * in + i)] = bf16_to_f32(bits[i]);
    }
  }
  auto x_row = [&](int64_t r) { return wide.empty() ? static_cast<const float*>(detail::row_raw(x, r)) : wide.data() + r * in; };
  // low (n, rank) = x · Aᵀ, then y += scale · low · Bᵀ; each element's sum runs in one order whatever
  // the split across threads, so a row's result does not depend on the rows beside it.
  std::vector<float> low(static_cast<size_t>(n * rank));
  compute_pool().parallel_for(n * rank, std::max<int64_t>(1, 8192 / std::max<int64_t>(in, 1)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) low[static_cast<size_t>(i)] = dot(a_data + (i % rank) * in, x_row(i / rank), in);
  });
  compute_pool().parallel_for(out, std::max<int64_t>(16, 8192 / std::max<int64_t>(n * rank, 1)), [&](int64_t j0, int64_t j1) {
    for (int64_t r = 0; r < n; ++r) {
      auto* yr = static_cast<float*>(detail::row_raw(y, r));
      for (int64_t j = j0; j < j1; ++j) yr[j] += scale * dot(b_data + j * rank, low.data() + r * rank, rank);
    }
  });
}

}  // namespace sanctum::ops::cpu

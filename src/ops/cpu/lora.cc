#include "ops/cpu/lora.h"

#include <array>
#include <vector>

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
  std::vector<float> row(static_cast<size_t>(in)), low(static_cast<size_t>(rank));
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = static_cast<const float*>(detail::row_raw(x, r));
    if (x.dtype() == DType::bf16) {
      const auto* bits = static_cast<const uint16_t*>(detail::row_raw(x, r));
      for (int64_t i = 0; i < in; ++i) row[static_cast<size_t>(i)] = bf16_to_f32(bits[i]);
      xr = row.data();
    }
    for (int64_t k = 0; k < rank; ++k) low[static_cast<size_t>(k)] = dot(a_data + k * in, xr, in);
    auto* yr = static_cast<float*>(detail::row_raw(y, r));
    for (int64_t j = 0; j < out; ++j) yr[j] += scale * dot(b_data + j * rank, low.data(), rank);
  }
}

}  // namespace sanctum::ops::cpu

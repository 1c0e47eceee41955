#include "ops/ref/matmul.h"

#include <cmath>

#include "ops/op_util.h"

namespace sanctum::ops::ref {

namespace {
struct Affine {
  float scale, q, bias;
};
// The parts of quantized element (r, c): w = scale * q + bias.
Affine affine_at(const Weight& w, int64_t r, int64_t c) {
  const int bits = w.quant.bits, per_word = 32 / bits;
  const uint32_t word = w.data.data<uint32_t>()[r * w.data.stride(0) + c / per_word];
  const uint32_t q = (word >> (bits * (c % per_word))) & ((1u << bits) - 1u);
  const int64_t g = c / w.quant.group_size;
  return {load_as_f32(w.scales.raw(), w.scales.dtype(), r * w.scales.stride(0) + g), static_cast<float>(q),
          load_as_f32(w.biases.raw(), w.biases.dtype(), r * w.biases.stride(0) + g)};
}
}  // namespace

float weight_at(const Weight& w, int64_t r, int64_t c) {
  if (!w.quantized()) return load_as_f32(w.data.raw(), w.data.dtype(), r * w.data.stride(0) + c);
  const Affine e = affine_at(w, r, c);
  return e.scale * e.q + e.bias;
}

float weight_at_fma(const Weight& w, int64_t r, int64_t c) {
  if (!w.quantized()) return load_as_f32(w.data.raw(), w.data.dtype(), r * w.data.stride(0) + c);
  const Affine e = affine_at(w, r, c);
  return std::fma(e.scale, e.q, e.bias);
}

// Double accumulation: the reference is meant to be closer to the exact sum than any f32 kernel.
void matmul(const Tensor& x, const Weight& w, Tensor& y) {
  const int64_t n = x.dim(0), k = w.cols, m = w.rows;
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = detail::row_ptr<const float>(x, i);
    float* yr = detail::row_ptr<float>(y, i);
    for (int64_t r = 0; r < m; ++r) {
      double acc = 0.0;
      for (int64_t c = 0; c < k; ++c) acc += static_cast<double>(xr[c]) * static_cast<double>(weight_at(w, r, c));
      yr[r] = static_cast<float>(acc);
    }
  }
}

}  // namespace sanctum::ops::ref

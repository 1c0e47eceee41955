// Embedding lookup: copies (dense) or dequantizes (scale * q + bias, in f32) one table row per id.
#include <cstring>
#include <vector>

#include "ops/cpu/int8_weight.h"
#include "ops/cpu/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops::cpu {

namespace {
void dequantize_row(const Weight& w, int64_t r, float* out) {
  const int bits = w.quant.bits, per_word = 32 / bits, g = w.quant.group_size;
  const uint32_t mask = (1u << bits) - 1u;
  const uint32_t* words = w.data.data<const uint32_t>() + r * w.data.stride(0);
  const void* scales =
      static_cast<const char*>(w.scales.raw()) + r * w.scales.stride(0) * static_cast<int64_t>(dtype_size(w.scales.dtype()));
  const void* biases =
      static_cast<const char*>(w.biases.raw()) + r * w.biases.stride(0) * static_cast<int64_t>(dtype_size(w.biases.dtype()));
  // A table tied to an lm_head repacked for int8 matmuls: the copy holds the same bytes, and the
  // checkpoint's pages were released.
  const Int8Weight* packed = int8_weight(w);
  for (int64_t c0 = 0; c0 < w.cols; c0 += g) {
    const float s = packed ? packed->scale(r, c0 / g) : load_as_f32(scales, w.scales.dtype(), c0 / g);
    const float b = packed ? packed->bias(r, c0 / g) : load_as_f32(biases, w.biases.dtype(), c0 / g);
    for (int64_t c = c0; c < c0 + g; c += per_word) {
      const int64_t wi = c / per_word;
      const uint32_t word = packed ? packed->row_words(r, wi / 16)[wi % 16] : words[wi];
      for (int i = 0; i < per_word; ++i) out[c + i] = s * static_cast<float>((word >> (bits * i)) & mask) + b;
    }
  }
}
}  // namespace

void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) {
  const int64_t dim = table.cols;
  for (size_t i = 0; i < ids.size(); ++i) {
    float* o = detail::row_ptr<float>(out, static_cast<int64_t>(i));
    const int64_t r = ids[i];
    if (table.quantized()) {
      dequantize_row(table, r, o);
    } else if (table.data.dtype() == DType::f32) {
      std::memcpy(o, table.data.data<const float>() + r * table.data.stride(0), static_cast<size_t>(dim) * sizeof(float));
    } else {
      const void* row = static_cast<const char*>(table.data.raw()) + r * table.data.stride(0) * 2;
      for (int64_t c = 0; c < dim; ++c) o[c] = load_as_f32(row, table.data.dtype(), c);
    }
  }
}

}  // namespace sanctum::ops::cpu

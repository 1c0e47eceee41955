// The KV cache's writes: each new token's rows converted once into the stored format
// (ops/kv_format.h). Scalar: a forward writes n rows but reads the whole cache.
#include <algorithm>
#include <cmath>

#include "ops/cpu/kernels.h"

namespace sanctum::ops::cpu {

namespace {

// The bf16 nearest x from above (x >= 0) or below, so that codes computed against the stored
// scale never pass the code range.
uint16_t bf16_at_least(float x) {
  uint16_t b = f32_to_bf16(x);
  if (bf16_to_f32(b) < x) b = static_cast<uint16_t>(b & 0x8000 ? b - 1 : b + 1);
  return b;
}
uint16_t bf16_at_most(float x) {
  uint16_t b = f32_to_bf16(x);
  if (bf16_to_f32(b) > x) b = static_cast<uint16_t>(b & 0x8000 ? b + 1 : b - 1);
  return b;
}

void quantize_q8(const float* x, int64_t d, int8_t* codes, uint16_t* scales) {
  for (int64_t b0 = 0, blk = 0; b0 < d; b0 += kKvBlock, ++blk) {
    const int64_t len = std::min(kKvBlock, d - b0);
    float amax = 0.0f;
    for (int64_t c = 0; c < len; ++c) amax = std::max(amax, std::fabs(x[b0 + c]));
    const uint16_t s = bf16_at_least(amax / 127.0f);
    const float sf = bf16_to_f32(s);
    scales[blk] = s;
    for (int64_t c = 0; c < len; ++c) {
      const float q = sf > 0.0f ? std::nearbyint(x[b0 + c] / sf) : 0.0f;
      codes[b0 + c] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
  }
}

void quantize_q4(const float* x, int64_t d, uint8_t* packed, uint16_t* scales) {
  for (int64_t b0 = 0, blk = 0; b0 < d; b0 += kKvBlock, ++blk) {
    const int64_t len = std::min(kKvBlock, d - b0);
    float lo = x[b0], hi = x[b0];
    for (int64_t c = 1; c < len; ++c) {
      lo = std::min(lo, x[b0 + c]);
      hi = std::max(hi, x[b0 + c]);
    }
    const uint16_t m = bf16_at_most(lo);
    const float mf = bf16_to_f32(m);
    const uint16_t s = bf16_at_least((hi - mf) / 15.0f);
    const float sf = bf16_to_f32(s);
    scales[2 * blk] = s;
    scales[2 * blk + 1] = m;
    uint8_t* out = packed + blk * 16;
    std::fill(out, out + 16, uint8_t{0});
    for (int64_t c = 0; c < len; ++c) {
      const float q = sf > 0.0f ? std::nearbyint((x[b0 + c] - mf) / sf) : 0.0f;
      const auto code = static_cast<uint8_t>(std::clamp(q, 0.0f, 15.0f));
      out[c % 16] = static_cast<uint8_t>(out[c % 16] | (c < 16 ? code : code << 4));
    }
  }
}

}  // namespace

void store_kv_rows(const Tensor& src, const KvRows& dst, int64_t row0) {
  const int64_t n = src.dim(0), heads = dst.kv_heads(), d = dst.head_dim;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const float* x = src.data<const float>() + i * src.stride(0) + h * d;
      const int64_t r = row0 + i;
      switch (dst.format) {
        case KvFormat::f32: std::copy(x, x + d, dst.data.data<float>() + r * dst.data.stride(0) + h * dst.data.stride(1)); break;
        case KvFormat::bf16: {
          uint16_t* o = dst.data.data<uint16_t>() + r * dst.data.stride(0) + h * dst.data.stride(1);
          for (int64_t c = 0; c < d; ++c) o[c] = f32_to_bf16(x[c]);
          break;
        }
        case KvFormat::q8:
          quantize_q8(x, d, reinterpret_cast<int8_t*>(dst.data.data<uint8_t>() + r * dst.data.stride(0) + h * dst.data.stride(1)),
                      dst.scales.data<uint16_t>() + r * dst.scales.stride(0) + h * dst.scales.stride(1));
          break;
        case KvFormat::q4:
          quantize_q4(x, d, dst.data.data<uint8_t>() + r * dst.data.stride(0) + h * dst.data.stride(1),
                      dst.scales.data<uint16_t>() + r * dst.scales.stride(0) + h * dst.scales.stride(1));
          break;
      }
    }
}

}  // namespace sanctum::ops::cpu

#include "ops/ref/kv_cache.h"

namespace sanctum::ops::ref {

Tensor dequantize_kv(const KvRows& r) {
  const int64_t n = r.rows(), heads = r.kv_heads(), d = r.head_dim;
  Tensor out = Tensor::zeros({n, heads, d}, DType::f32);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      float* o = out.data<float>() + (i * heads + h) * d;
      const int64_t at = i * r.data.stride(0) + h * r.data.stride(1);
      const int64_t s_at = r.scales ? i * r.scales.stride(0) + h * r.scales.stride(1) : 0;
      for (int64_t c = 0; c < d; ++c) {
        const int64_t blk = c / kKvBlock, in_blk = c % kKvBlock;
        switch (r.format) {
          case KvFormat::f32: o[c] = r.data.data<const float>()[at + c]; break;
          case KvFormat::bf16: o[c] = bf16_to_f32(r.data.data<const uint16_t>()[at + c]); break;
          case KvFormat::q8: {
            const auto code = static_cast<int8_t>(r.data.data<const uint8_t>()[at + c]);
            o[c] = bf16_to_f32(r.scales.data<const uint16_t>()[s_at + blk]) * static_cast<float>(code);
            break;
          }
          case KvFormat::q4: {
            const uint8_t byte = r.data.data<const uint8_t>()[at + blk * 16 + in_blk % 16];
            const int code = in_blk < 16 ? byte & 0xF : byte >> 4;
            const uint16_t* s = r.scales.data<const uint16_t>() + s_at + 2 * blk;
            o[c] = bf16_to_f32(s[1]) + bf16_to_f32(s[0]) * static_cast<float>(code);
            break;
          }
        }
      }
    }
  return out;
}

}  // namespace sanctum::ops::ref

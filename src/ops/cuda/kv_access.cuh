#pragma once
// The kernels' reads and writes of a KV cache's stored elements (kv_elem.cuh): bf16 rounded to nearest
// even by the CPU's own bit arithmetic (tensor/dtype.h), so a GPU cache holds the CPU's bytes, and
// reads that dequantize in registers.
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda/kv_elem.cuh"

namespace sanctum::ops::cuda {

// f32 -> bf16 bits, round to nearest even, NaN kept quiet with its sign: tensor/dtype.h's f32_to_bf16.
__device__ __forceinline__ uint16_t bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
__device__ __forceinline__ float bf16_value(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }
__device__ __forceinline__ uint32_t bf16_bits_pair(float lo, float hi) {
  return static_cast<uint32_t>(bf16_bits(lo)) | (static_cast<uint32_t>(bf16_bits(hi)) << 16);
}

// An f32 value as a cache of element C stores it: float as is, uint16_t as bf16 bits.
template <class C>
__device__ __forceinline__ C kv_stored(float x) {
  if constexpr (std::is_same_v<C, float>) return x;
  else return bf16_bits(x);
}

// Byte b (0..3) of a word as a signed code, exactly: the code + 128 laid in the low mantissa bits of
// 2^23 (one byte permute) less 2^23 + 128, three full-rate instructions where an int-to-float
// conversion runs at a quarter of the rate and bounds a q8 cache's decode.
__device__ __forceinline__ float q8_code(uint32_t w, int b) {
  return __uint_as_float(__byte_perm(w ^ 0x80808080u, 0x4b000000u, 0x7540u + static_cast<unsigned>(b))) - 8388736.0f;
}

// Value c of (row, head) as f32.
template <KvElem E>
__device__ __forceinline__ float kv_value(const KvSide& s, int64_t row, int64_t head, int64_t c) {
  const int64_t at = row * s.s0 + head * s.s1 + c;
  if constexpr (E == KvElem::f32) {
    return __ldg(static_cast<const float*>(s.data) + at);
  } else if constexpr (E == KvElem::bf16) {
    return bf16_value(__ldg(static_cast<const unsigned short*>(s.data) + at));
  } else {
    const float scale = bf16_value(__ldg(s.scales + row * s.sc_s0 + head * s.sc_s1 + c / kQ8Block));
    return scale * static_cast<float>(__ldg(static_cast<const signed char*>(s.data) + at));
  }
}

// The stored bytes of N (1 or 4) consecutive values as one load brings them in, unconverted, so a
// kernel can issue a whole batch of loads before it waits on the first: f32 one word a value, bf16
// two values a word (the first in the low half), q8 four codes a word and the block's scale bits (one
// code: the scale bits in the word's high half).
template <KvElem E, int N>
struct KvWords {
  uint32_t w[(N * (E == KvElem::f32 ? 4 : E == KvElem::bf16 ? 2 : 1) + 3) / 4];
  uint32_t scale;
};

// Values c .. c + N - 1 of (row, head); for N = 4, c a multiple of 4 and the rows aligned to 4 values.
template <KvElem E, int N>
__device__ __forceinline__ KvWords<E, N> kv_load(const KvSide& s, int64_t row, int64_t head, int64_t c) {
  static_assert(N == 1 || N == 4);
  KvWords<E, N> x{};
  const int64_t at = row * s.s0 + head * s.s1 + c;
  if constexpr (E == KvElem::f32 && N == 4) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(static_cast<const float*>(s.data) + at));
    x.w[0] = u.x;
    x.w[1] = u.y;
    x.w[2] = u.z;
    x.w[3] = u.w;
  } else if constexpr (E == KvElem::f32) {
    x.w[0] = __ldg(reinterpret_cast<const unsigned int*>(static_cast<const float*>(s.data) + at));
  } else if constexpr (E == KvElem::bf16 && N == 4) {
    const uint2 u = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(s.data) + at));
    x.w[0] = u.x;
    x.w[1] = u.y;
  } else if constexpr (E == KvElem::bf16) {
    x.w[0] = __ldg(static_cast<const unsigned short*>(s.data) + at);
  } else {
    const uint32_t scale = __ldg(s.scales + row * s.sc_s0 + head * s.sc_s1 + c / kQ8Block);
    if constexpr (N == 4) {
      x.w[0] = __ldg(reinterpret_cast<const unsigned int*>(static_cast<const int8_t*>(s.data) + at));
      x.scale = scale;
    } else {  // one register: the code in the low byte, the scale in the high half
      x.w[0] = __ldg(static_cast<const unsigned char*>(s.data) + at) | scale << 16;
    }
  }
  return x;
}

// Value e (0 .. N - 1) of loaded words as f32, as kv_value reads it.
template <KvElem E, int N>
__device__ __forceinline__ float kv_word_value(const KvWords<E, N>& x, int e) {
  if constexpr (E == KvElem::f32) return __uint_as_float(x.w[e]);
  else if constexpr (E == KvElem::bf16) return __uint_as_float(e % 2 == 0 ? x.w[e / 2] << 16 : x.w[e / 2] & 0xffff0000u);
  else if constexpr (N == 1) return __uint_as_float(x.w[0] & 0xffff0000u) * q8_code(x.w[0], 0);
  else return bf16_value(static_cast<uint16_t>(x.scale)) * q8_code(x.w[e / 4], e % 4);
}

// Values c .. c + 7 of (row, head) as eight bf16s (value c in the low half of word 0): f32 rounded once,
// bf16 as stored, q8 dequantized in f32 and rounded once; c a multiple of 8 and the rows aligned to 8 values.
template <KvElem E>
__device__ __forceinline__ uint4 kv_bf16x8(const KvSide& s, int64_t row, int64_t head, int64_t c) {
  const int64_t at = row * s.s0 + head * s.s1 + c;
  if constexpr (E == KvElem::f32) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(s.data) + at));
    const float4 b = __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(s.data) + at + 4));
    return make_uint4(bf16_bits_pair(a.x, a.y), bf16_bits_pair(a.z, a.w), bf16_bits_pair(b.x, b.y), bf16_bits_pair(b.z, b.w));
  } else if constexpr (E == KvElem::bf16) {
    return __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(s.data) + at));
  } else {
    const uint2 w = __ldg(reinterpret_cast<const uint2*>(static_cast<const int8_t*>(s.data) + at));
    const float scale = bf16_value(__ldg(s.scales + row * s.sc_s0 + head * s.sc_s1 + c / kQ8Block));
    return make_uint4(bf16_bits_pair(scale * q8_code(w.x, 0), scale * q8_code(w.x, 1)),
                      bf16_bits_pair(scale * q8_code(w.x, 2), scale * q8_code(w.x, 3)),
                      bf16_bits_pair(scale * q8_code(w.y, 0), scale * q8_code(w.y, 1)),
                      bf16_bits_pair(scale * q8_code(w.y, 2), scale * q8_code(w.y, 3)));
  }
}

}  // namespace sanctum::ops::cuda

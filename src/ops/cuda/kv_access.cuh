#pragma once
// The kernels' reads and writes of a KV cache's stored elements (kv_elem.cuh): bf16 rounded to nearest
// even by the CPU's own bit arithmetic (tensor/dtype.h), so a GPU cache holds the CPU's bytes, and
// reads that dequantize in registers (q8 and q4 to the values ops/ref/kv_cache.cc computes).
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

// Nibble b (0..3, of the low nibbles; a word shifted right by 4 first for the high ones) of a word as a
// q4 code, exactly: the code laid in the low mantissa bits of 2^23 less 2^23, as q8_code does it.
__device__ __forceinline__ float q4_code(uint32_t w, int b) { return __uint_as_float(((w >> (8 * b)) & 0xfu) | 0x4b000000u) - 8388608.0f; }
// A q4 value from its code and its block's (scale, min) word (scale bits in the low half): min + scale *
// code, the product exact (8 bits of scale by 4 of code), so rounded once as the CPU's dequantization.
__device__ __forceinline__ float q4_value(uint32_t scale_min, float code) {
  return fmaf(__uint_as_float(scale_min << 16), code, __uint_as_float(scale_min & 0xffff0000u));
}
// Where value c of a q4 (row, head) lies: the byte's offset in the row, the nibble's shift, the scale's.
__device__ __forceinline__ int64_t q4_byte(int64_t c) { return c / kQ8Block * 16 + c % 16; }
__device__ __forceinline__ uint32_t q4_shift(int64_t c) { return c % kQ8Block >= 16 ? 4u : 0u; }
__device__ __forceinline__ uint32_t q4_scale_min(const KvSide& s, int64_t row, int64_t head, int64_t c) {
  const uint16_t* p = s.scales + row * s.sc_s0 + head * s.sc_s1 + 2 * (c / kQ8Block);
  return static_cast<uint32_t>(__ldg(p)) | static_cast<uint32_t>(__ldg(p + 1)) << 16;
}

// Value c of (row, head) as f32.
template <KvElem E>
__device__ __forceinline__ float kv_value(const KvSide& s, int64_t row, int64_t head, int64_t c) {
  const int64_t at = row * s.s0 + head * s.s1 + c;
  if constexpr (E == KvElem::f32) {
    return __ldg(static_cast<const float*>(s.data) + at);
  } else if constexpr (E == KvElem::bf16) {
    return bf16_value(__ldg(static_cast<const unsigned short*>(s.data) + at));
  } else if constexpr (E == KvElem::q4) {
    const uint32_t byte = __ldg(static_cast<const unsigned char*>(s.data) + row * s.s0 + head * s.s1 + q4_byte(c));
    return q4_value(q4_scale_min(s, row, head, c), q4_code(byte >> q4_shift(c), 0));
  } else {
    const float scale = bf16_value(__ldg(s.scales + row * s.sc_s0 + head * s.sc_s1 + c / kQ8Block));
    return scale * static_cast<float>(__ldg(static_cast<const signed char*>(s.data) + at));
  }
}

// The stored bytes of N (1 or 4) consecutive values as one load brings them in, unconverted, so a
// kernel can issue a whole batch of loads before it waits on the first: f32 one word a value, bf16
// two values a word (the first in the low half), q8 four codes a word and the block's scale bits (one
// code: the scale bits in the word's high half), q4 the four bytes whose low or high nibbles are the
// codes and the block's (scale, min) word (one code: its value, dequantized as it loads, since two
// words a value would not fit the registers of a batch).
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
  } else if constexpr (E == KvElem::q4) {
    const uint8_t* bytes = static_cast<const uint8_t*>(s.data) + row * s.s0 + head * s.s1 + q4_byte(c);
    if constexpr (N == 4) {
      x.w[0] = __ldg(reinterpret_cast<const unsigned int*>(bytes));
      x.scale = __ldg(reinterpret_cast<const unsigned int*>(s.scales + row * s.sc_s0 + head * s.sc_s1 + 2 * (c / kQ8Block)));
    } else {
      x.w[0] = __float_as_uint(q4_value(q4_scale_min(s, row, head, c), q4_code(__ldg(bytes) >> q4_shift(c), 0)));
    }
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

// Value e (0 .. N - 1) of loaded words as f32, as kv_value reads it. q4 words of four values take
// `shift`, q4_shift of the first value's c: a constant of the lane in the decode kernel, so that no
// batch holds it.
template <KvElem E, int N>
__device__ __forceinline__ float kv_word_value(const KvWords<E, N>& x, int e, uint32_t shift = 0) {
  if constexpr (E == KvElem::f32) return __uint_as_float(x.w[e]);
  else if constexpr (E == KvElem::bf16) return __uint_as_float(e % 2 == 0 ? x.w[e / 2] << 16 : x.w[e / 2] & 0xffff0000u);
  else if constexpr (E == KvElem::q4 && N == 1) return __uint_as_float(x.w[0]);
  else if constexpr (E == KvElem::q4) return q4_value(x.scale, q4_code(x.w[0] >> shift, e));
  else if constexpr (N == 1) return __uint_as_float(x.w[0] & 0xffff0000u) * q8_code(x.w[0], 0);
  else return bf16_value(static_cast<uint16_t>(x.scale)) * q8_code(x.w[e / 4], e % 4);
}

// Values c .. c + 7 of (row, head) as eight bf16s (value c in the low half of word 0): f32 rounded once,
// bf16 as stored, q8 and q4 dequantized in f32 and rounded once; c a multiple of 8 and the rows aligned
// to 8 values.
template <KvElem E>
__device__ __forceinline__ uint4 kv_bf16x8(const KvSide& s, int64_t row, int64_t head, int64_t c) {
  const int64_t at = row * s.s0 + head * s.s1 + c;
  if constexpr (E == KvElem::f32) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(s.data) + at));
    const float4 b = __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(s.data) + at + 4));
    return make_uint4(bf16_bits_pair(a.x, a.y), bf16_bits_pair(a.z, a.w), bf16_bits_pair(b.x, b.y), bf16_bits_pair(b.z, b.w));
  } else if constexpr (E == KvElem::bf16) {
    return __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(s.data) + at));
  } else if constexpr (E == KvElem::q4) {
    const uint2 w = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(s.data) + row * s.s0 + head * s.s1 + q4_byte(c)));
    const uint32_t sm = q4_scale_min(s, row, head, c), lo = w.x >> q4_shift(c), hi = w.y >> q4_shift(c);
    return make_uint4(bf16_bits_pair(q4_value(sm, q4_code(lo, 0)), q4_value(sm, q4_code(lo, 1))),
                      bf16_bits_pair(q4_value(sm, q4_code(lo, 2)), q4_value(sm, q4_code(lo, 3))),
                      bf16_bits_pair(q4_value(sm, q4_code(hi, 0)), q4_value(sm, q4_code(hi, 1))),
                      bf16_bits_pair(q4_value(sm, q4_code(hi, 2)), q4_value(sm, q4_code(hi, 3))));
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

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

// Byte b (0..3) of a word as a signed code.
__device__ __forceinline__ float q8_code(uint32_t w, int b) { return static_cast<float>(static_cast<int32_t>(w << (24 - 8 * b)) >> 24); }

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

// Values c .. c + 3 of (row, head) as f32; c a multiple of 4 and the rows aligned to 4 values.
template <KvElem E>
__device__ __forceinline__ float4 kv_value4(const KvSide& s, int64_t row, int64_t head, int64_t c) {
  const int64_t at = row * s.s0 + head * s.s1 + c;
  if constexpr (E == KvElem::f32) {
    return __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(s.data) + at));
  } else if constexpr (E == KvElem::bf16) {
    const uint2 w = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(s.data) + at));
    return make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u), __uint_as_float(w.y << 16),
                       __uint_as_float(w.y & 0xffff0000u));
  } else {
    const uint32_t w = __ldg(reinterpret_cast<const unsigned int*>(static_cast<const int8_t*>(s.data) + at));
    const float scale = bf16_value(__ldg(s.scales + row * s.sc_s0 + head * s.sc_s1 + c / kQ8Block));
    return make_float4(scale * q8_code(w, 0), scale * q8_code(w, 1), scale * q8_code(w, 2), scale * q8_code(w, 3));
  }
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

#pragma once
// Element types and scalar conversions. bf16/f16 are stored as raw uint16_t bits.
#include <cstdint>
#include <cstring>
#include <string>

namespace sanctum {

enum class DType : uint8_t { f32, bf16, f16, i32, u32, u8, i64 };
enum class Device : uint8_t { cpu, cuda };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
const char* device_name(Device device);
bool is_float(DType dtype);

inline float bf16_to_f32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, as torch/mlx do; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float f);

// Reads element i of a float-typed buffer (f32, bf16 or f16) as float. For tests and slow paths.
inline float load_as_f32(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(data)[i];
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    default: return 0.0f;
  }
}

}  // namespace sanctum

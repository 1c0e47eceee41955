#pragma once
// The KV cache's stored formats (--kv-cache-dtype). Keys and values are each kept in one format;
// the attention kernels read it as stored and dequantize in registers, so no full-precision copy of
// the cache ever exists.
//   f32:  (rows, kv_heads, head_dim) f32, exactly the cache of earlier releases (parity runs).
//   bf16: (rows, kv_heads, head_dim) bf16, round to nearest even.
//   q8:   (rows, kv_heads, head_dim) int8 codes (stored as u8 bits) and, per block of 32 values
//         along head_dim, one bf16 scale (rows, kv_heads, blocks): x = scale * code, symmetric,
//         codes in [-127, 127] (llama.cpp's q8_0 with a bf16 scale).
//   q4:   per block of 32 values 16 bytes (rows, kv_heads, blocks * 16): byte i holds value i in its
//         low nibble and value i + 16 in its high one; and per block a bf16 (scale, min) pair
//         (rows, kv_heads, 2 * blocks): x = min + scale * code, codes in [0, 15] (affine, mlx-style
//         group 32: values are not centred on zero the way keys are).
// The last block of a head_dim that is no multiple of 32 is shorter; its unused codes are zero.
#include <cstdint>
#include <string_view>

#include "tensor/tensor.h"

namespace sanctum::ops {

enum class KvFormat : uint8_t { f32, bf16, q8, q4 };

// What --kv-cache-dtype names: the format of keys and of values.
//   f32: both f32. bf16: both bf16. q8: both q8. q4v: keys q8, values q4 (the keys' outliers steer
//   the softmax, so they keep 8 bits; the values are averaged by it).
enum class KvCacheDtype : uint8_t { f32, bf16, q8, q4v };

inline constexpr int64_t kKvBlock = 32;

// A CPU prefill reads bf16 keys widened and transposed into scratch of at most this many bytes (the
// keys past it are read in rows, with the same bits): 32k keys of two 64-wide kv heads, 8k of two
// 256-wide ones.
inline constexpr int64_t kMaxTransposedKeyBytes = int64_t{16} << 20;

KvFormat key_format(KvCacheDtype dtype);
KvFormat value_format(KvCacheDtype dtype);
const char* kv_cache_dtype_name(KvCacheDtype dtype);
// "f32", "bf16", "q8" or "q4v"; throws Error(invalid_argument) naming the accepted values otherwise.
KvCacheDtype parse_kv_cache_dtype(std::string_view name);

// The dtype of caches made from now on, on any thread. Before any set_kv_cache_dtype call it comes
// from the environment variable SANCTUM_KV_CACHE_DTYPE (unset: f32, the library's default; the
// command-line tools choose bf16 unless told otherwise, see cli/device_flags.h).
void set_kv_cache_dtype(KvCacheDtype dtype);
KvCacheDtype kv_cache_dtype();
// True once set_kv_cache_dtype was called or the environment names a dtype.
bool kv_cache_dtype_chosen();

// Bytes of one token's row of one side (keys or values) in `format`: kv_heads heads of head_dim.
size_t kv_row_bytes(KvFormat format, int64_t kv_heads, int64_t head_dim);

// One side of a KV cache in its stored format (shapes above); `rows` tokens.
struct KvRows {
  Tensor data;
  Tensor scales;  // q8 and q4 only
  KvFormat format = KvFormat::f32;
  int64_t head_dim = 0;

  int64_t rows() const { return data ? data.dim(0) : 0; }
  int64_t kv_heads() const { return data ? data.dim(1) : 0; }
  size_t nbytes() const { return data.nbytes() + scales.nbytes(); }
  // Rows [begin, end), views of the same storage.
  KvRows slice_rows(int64_t begin, int64_t end) const;
  // Zero-filled storage for `rows` tokens.
  static KvRows zeros(int64_t rows, int64_t kv_heads, int64_t head_dim, KvFormat format, Device device);
};

}  // namespace sanctum::ops

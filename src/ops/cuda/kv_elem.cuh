#pragma once
// The KV cache's stored elements (ops/kv_format.h) as the CUDA attention paths see them: f32, bf16,
// q8 (int8 codes, one bf16 scale per 32 values along head_dim) and q4 (4-bit codes, a bf16 scale and
// min per 32 values; values only, beside q8 keys), and where a side's rows lie. The kernels' reads and
// writes of them are in kv_access.cuh.
#include <cstdint>

#include "ops/kv_format.h"

namespace sanctum::ops::cuda {

enum class KvElem : int { f32 = 0, bf16 = 1, q8 = 2, q4 = 3 };

// One side (keys or values) of a cache: value c of (row, head) at data + row * s0 + head * s1 + c, in
// elements (floats, bf16s or int8 codes); for q8 its scale at scales + row * sc_s0 + head * sc_s1 + c / 32.
// q4: value c in byte (c / 32) * 16 + c % 16 of (row, head) (strides in bytes), its low nibble for
// c % 32 < 16 and its high one above; the block's (scale, min) at scales + ... + 2 * (c / 32).
struct KvSide {
  const void* data = nullptr;
  int64_t s0 = 0, s1 = 0;
  const uint16_t* scales = nullptr;
  int64_t sc_s0 = 0, sc_s1 = 0;
};

inline constexpr int kQ8Block = static_cast<int>(kKvBlock);  // values a q8 scale (or a q4 scale and min) covers

// Bytes a run of values takes in the row's layout: a q4 run of up to 16 values (never across a
// half-block) takes one byte a value, a nibble of each, as q8's codes do.
inline int kv_elem_bytes(KvElem e) { return e == KvElem::f32 ? 4 : e == KvElem::bf16 ? 2 : 1; }
// Bits a value takes in the cache, its scales aside.
inline int kv_elem_bits(KvElem e) { return e == KvElem::q4 ? 4 : 8 * kv_elem_bytes(e); }

inline KvElem kv_elem(KvFormat f) {
  switch (f) {
    case KvFormat::bf16: return KvElem::bf16;
    case KvFormat::q8: return KvElem::q8;
    case KvFormat::q4: return KvElem::q4;
    default: return KvElem::f32;
  }
}

// The side of a cache of rows (rows, kv_heads, head_dim); the format is the caller's check.
inline KvSide kv_side(const KvRows& r) {
  KvSide s;
  s.data = r.data.raw();
  s.s0 = r.data.stride(0);
  s.s1 = r.data.stride(1);
  if (r.format == KvFormat::q8 || r.format == KvFormat::q4) {
    s.scales = static_cast<const uint16_t*>(r.scales.raw());
    s.sc_s0 = r.scales.stride(0);
    s.sc_s1 = r.scales.stride(1);
  }
  return s;
}

// Whether every (row, head) of the side starts on a multiple of `values` elements of a `bytes`-aligned
// base; for q4 also whether each block's (scale, min) pair is one aligned 4-byte word.
inline bool kv_rows_aligned(const KvSide& s, KvElem e, int values) {
  const auto base = reinterpret_cast<uintptr_t>(s.data);
  const bool rows = base % static_cast<uintptr_t>(values * kv_elem_bytes(e)) == 0 && s.s0 % values == 0 && s.s1 % values == 0;
  if (e != KvElem::q4) return rows;
  return rows && reinterpret_cast<uintptr_t>(s.scales) % 4 == 0 && s.sc_s0 % 2 == 0 && s.sc_s1 % 2 == 0;
}

}  // namespace sanctum::ops::cuda

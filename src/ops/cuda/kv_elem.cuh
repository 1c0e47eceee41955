#pragma once
// The KV cache's stored elements (ops/kv_format.h) as the CUDA attention paths see them: f32, bf16
// and q8 (int8 codes, one bf16 scale per 32 values along head_dim), and where a side's rows lie. The
// kernels' reads and writes of them are in kv_access.cuh.
#include <cstdint>

#include "ops/kv_format.h"

namespace sanctum::ops::cuda {

enum class KvElem : int { f32 = 0, bf16 = 1, q8 = 2 };

// One side (keys or values) of a cache: value c of (row, head) at data + row * s0 + head * s1 + c, in
// elements (floats, bf16s or int8 codes); for q8 its scale at scales + row * sc_s0 + head * sc_s1 + c / 32.
struct KvSide {
  const void* data = nullptr;
  int64_t s0 = 0, s1 = 0;
  const uint16_t* scales = nullptr;
  int64_t sc_s0 = 0, sc_s1 = 0;
};

inline constexpr int kQ8Block = static_cast<int>(kKvBlock);

inline int kv_elem_bytes(KvElem e) { return e == KvElem::f32 ? 4 : e == KvElem::bf16 ? 2 : 1; }

// The side of a cache of f32, bf16 or q8 rows (rows, kv_heads, head_dim); the format is the caller's check.
inline KvSide kv_side(const KvRows& r) {
  KvSide s;
  s.data = r.data.raw();
  s.s0 = r.data.stride(0);
  s.s1 = r.data.stride(1);
  if (r.format == KvFormat::q8) {
    s.scales = static_cast<const uint16_t*>(r.scales.raw());
    s.sc_s0 = r.scales.stride(0);
    s.sc_s1 = r.scales.stride(1);
  }
  return s;
}

// Whether every (row, head) of the side starts on a multiple of `values` elements of a `bytes`-aligned base.
inline bool kv_rows_aligned(const KvSide& s, KvElem e, int values) {
  const auto base = reinterpret_cast<uintptr_t>(s.data);
  return base % static_cast<uintptr_t>(values * kv_elem_bytes(e)) == 0 && s.s0 % values == 0 && s.s1 % values == 0;
}

}  // namespace sanctum::ops::cuda

// y = x · wᵀ for MLX affine-quantized weights (4 or 8 bits, groups of 32/64/128) with int8
// activations: the opt-in MatmulPrecision::int8 mode (ops/precision.h).
//
// Numerics (every target, mat-vec and mat-mat alike; tests/ops/matmul_int8_test.cc has a scalar twin):
//   x row, per weight group g of G values (one x scale per weight group, so the f32 work per
//   (row, group) is one scale-and-add whatever G; G <= 128 keeps the int8 error small, see the test):
//     amax = max |x_c|;  d_g = amax / 127;  q_c = round_to_nearest_even(x_c * (127 / amax))  (0 if amax == 0)
//     sx_g = Σ x_c in f32: 16 partial sums p_j (c ≡ j mod 16, in order), then p_j += p_{j+s} for s = 8,4,2,1
//   per (x row, weight row r), groups in order, starting from tot = 0:
//     isum = Σ_c code_rc * q_c                  exact in int32 (|isum| <= 128 * 255 * 127)
//     tot  = fma(float(isum) * d_g, scale_rg, tot)
//     tot  = fma(bias_rg, sx_g, tot)
//   y = tot.  The integer sum is exact in any order, so the f32 sequence alone fixes the bits: each y
//   row is the same for any n, tiling or thread count, and on every target.
//
// Kernels: AVX3_DL (AVX-512 VNNI, e.g. Zen 4, Ice Lake) runs vpdpbusd (u8 codes × s8 x, 4 products
// per i32 lane); every other target (and an AVX3_DL CPU without VNNI) runs the plain loops of
// GenericRun, which the compiler vectorises for that target.
//   mat-vec (n == 1): 16 weight rows at a time, 64 bytes of each per step; lane L of a 64-byte load
//     holds 8 (4-bit) or 4 (8-bit) consecutive values, so x is stored permuted to match ("kernel
//     order": per 128 values, the 64 even ones then the 64 odd ones for 4-bit; natural for 8-bit),
//     and an add-transpose tree turns 16 per-row accumulators into per-group sums with rows in lanes.
//     Weights prepared at load in int8 mode are read repacked (int8_weight.h: each 16-row block one
//     stream, scales and biases already transposed); others in the checkpoint layout, with each
//     block's scales and biases transposed on every call.
//   a decode batch (2 <= n <= kTileRows): each 16-row block is loaded and transposed to rows in lanes
//     once per unit (a 16x16 dword transpose, then the 4-bit nibbles split), and every x row
//     broadcasts its dwords against it, so the weights are read and unpacked once for all rows.
//   mat-mat (more rows): 32 weight rows are unpacked once into a row-interleaved panel (for each quad of 4
//     kernel-order values: 32 rows × 4 bytes), then each x row broadcasts its quad against the panel.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL  // compile the AVX3_DL target (VNNI) into this translation unit
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/matmul_int8.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "ops/cpu/convert-inl.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"
#include "base/process_memory.h"
#include "base/thread_pool.h"
#include "ops/cpu/int8_weight.h"
#include "ops/cpu/kernels.h"

HWY_BEFORE_NAMESPACE();
// The VNNI kernels need the avx512vnni target feature, which Highway 1.0.3's AVX3_DL attribute does
// not name. GCC adds it with `#pragma GCC target`; clang cannot extend Highway's attribute push, so
// clang builds (the fuzzing configuration) run the portable int8 loops on every target.
#undef SANCTUM_INT8_VNNI
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#define SANCTUM_INT8_VNNI 1
#pragma GCC target("avx512vnni")
#else
#define SANCTUM_INT8_VNNI 0
#endif
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {

// Quantized x rows of one call: codes (n, kpad) in the path's order, scales and group sums (n, groups).
// The storage is the calling thread's, kept from call to call and mapped on its own: buffers of
// every call's size (600 KB for 128 rows of 4864) allocated and freed through malloc would keep
// moving its mmap threshold and fragment the heap around longer-lived activations.
struct XQ {
  int64_t kpad = 0, groups = 0;
  int8_t* q = nullptr;
  float *d = nullptr, *sx = nullptr;
  const int8_t* row(int64_t i) const { return q + i * kpad; }
  const float* scale(int64_t i) const { return d + i * groups; }
  const float* sums(int64_t i) const { return sx + i * groups; }

  XQ(int64_t n, int64_t kpad_, int64_t groups_) : kpad(kpad_), groups(groups_) {
    struct Buffer {
      void* p = nullptr;
      size_t size = 0;
      ~Buffer() {
        if (p) ::munmap(p, size);
      }
    };
    thread_local Buffer buf;
    const size_t fbytes = static_cast<size_t>(n * groups) * sizeof(float);
    const size_t bytes = 2 * fbytes + static_cast<size_t>(n * kpad);
    if (bytes > buf.size) {
      if (buf.p) ::munmap(buf.p, buf.size);
      const size_t size = std::max(bytes, 2 * buf.size);
      buf.p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      check(buf.p != MAP_FAILED, ErrorKind::io, "out of memory quantizing matmul activations (" + std::to_string(size) + " bytes)");
      buf.size = size;
    }
    d = static_cast<float*>(buf.p);
    sx = d + n * groups;
    q = reinterpret_cast<int8_t*>(sx + n * groups);
  }
};

// ---------------------------------------------------------------------------------------------
// Portable path: natural order, plain loops.

void QuantizeRowGeneric(const float* HWY_RESTRICT x, int64_t k, int64_t G, int8_t* HWY_RESTRICT q, float* HWY_RESTRICT d,
                        float* HWY_RESTRICT sx) {
  for (int64_t g = 0; g < k / G; ++g) {
    const float* xg = x + g * G;
    float amax = 0.0f;
    float p[16] = {};
    for (int64_t c = 0; c < G; ++c) {
      amax = std::max(amax, std::fabs(xg[c]));
      p[c % 16] = p[c % 16] + xg[c];
    }
    for (int s = 8; s >= 1; s /= 2)
      for (int j = 0; j < s; ++j) p[j] = p[j] + p[j + s];
    d[g] = amax / 127.0f;
    sx[g] = p[0];
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t c = 0; c < G; ++c) q[g * G + c] = static_cast<int8_t>(std::nearbyint(xg[c] * id));
  }
}

void GenericRun(const Tensor& x, const Weight& wt, Tensor& y) {
  const int bits = wt.quant.bits;
  const int64_t n = x.dim(0), m = wt.rows, k = wt.cols, G = wt.quant.group_size, groups = k / G;
  XQ xq(n, k, groups);
  for (int64_t i = 0; i < n; ++i)
    QuantizeRowGeneric(x.data<const float>() + i * x.stride(0), k, G, xq.q + i * k, xq.d + i * groups, xq.sx + i * groups);
  float* ybase = y.data<float>();
  const int64_t ystride = y.stride(0);
  compute_pool().parallel_for(m, std::max<int64_t>(1, 65536 / std::max<int64_t>(k, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<uint8_t> codes(static_cast<size_t>(k));
    std::vector<float> ws(static_cast<size_t>(groups)), wb(ws.size());
    const int per_word = 32 / bits;
    const uint32_t mask = (1u << bits) - 1u;
    const size_t es = dtype_size(wt.scales.dtype());
    for (int64_t r = r0; r < r1; ++r) {
      const uint32_t* words = wt.data.data<const uint32_t>() + r * wt.data.stride(0);
      for (int64_t c = 0; c < k; ++c) codes[c] = static_cast<uint8_t>((words[c / per_word] >> (bits * (c % per_word))) & mask);
      ConvertToF32(static_cast<const char*>(wt.scales.raw()) + r * wt.scales.stride(0) * static_cast<int64_t>(es), wt.scales.dtype(),
                   ws.data(), groups);
      ConvertToF32(static_cast<const char*>(wt.biases.raw()) + r * wt.biases.stride(0) * static_cast<int64_t>(es), wt.biases.dtype(),
                   wb.data(), groups);
      for (int64_t i = 0; i < n; ++i) {
        const int8_t* q = xq.row(i);
        const float* d = xq.scale(i);
        const float* sx = xq.sums(i);
        float tot = 0.0f;
        for (int64_t g = 0; g < groups; ++g) {
          int32_t isum = 0;
          for (int64_t c = g * G; c < (g + 1) * G; ++c) isum += static_cast<int32_t>(codes[c]) * q[c];
          tot = std::fma(static_cast<float>(isum) * d[g], ws[g], tot);
          tot = std::fma(wb[g], sx[g], tot);
        }
        ybase[i * ystride + r] = tot;
      }
    }
  });
}

#if SANCTUM_INT8_VNNI
// ---------------------------------------------------------------------------------------------
// AVX-512 VNNI path.

// Shape facts of one call. A "unit" is the span whose 16 i32 accumulator lanes hold whole groups:
// 128 values for 4-bit (one 64-byte load), max(64, G) for 8-bit (one or two loads).
struct Shape8 {
  int bits;
  int64_t k, G, groups, row_bytes, unit, loads_per_unit, groups_per_unit, units, kpad;
};

Shape8 MakeShape8(int bits, int64_t k, int64_t G) {
  Shape8 s{};
  s.bits = bits;
  s.k = k;
  s.G = G;
  s.groups = k / G;
  s.row_bytes = k * bits / 8;
  const int64_t step = 512 / bits;  // values per 64-byte load
  s.unit = std::max(step, G);
  s.loads_per_unit = s.unit / step;
  s.groups_per_unit = s.unit / G;
  s.units = (k + s.unit - 1) / s.unit;
  s.kpad = s.units * s.unit;
  return s;
}

// p_j += p_{j+s} for s = 8, 4, 2, 1; returns p_0 (the fixed tree of the numerics contract).
HWY_INLINE float Tree16(__m512 p) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(p), _mm512_extractf32x8_ps(p, 1));
  __m128 f = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  f = _mm_add_ps(f, _mm_movehl_ps(f, f));
  f = _mm_add_ss(f, _mm_shuffle_ps(f, f, 1));
  return _mm_cvtss_f32(f);
}

// One x row (k values) -> codes in kernel order (s.kpad, zero padded), d and sx (s.groups).
void QuantizeRowV(const Shape8& s, const float* HWY_RESTRICT x, int8_t* HWY_RESTRICT q, float* HWY_RESTRICT d, float* HWY_RESTRICT sx) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  std::memset(q + s.k, 0, static_cast<size_t>(s.kpad - s.k));
  for (int64_t g = 0; g < s.groups; ++g) {
    const float* xg = x + g * s.G;
    __m512 amax = _mm512_setzero_ps(), p = _mm512_setzero_ps();
    for (int64_t c = 0; c < s.G; c += 16) {
      const __m512 v = _mm512_loadu_ps(xg + c);
      amax = _mm512_max_ps(amax, _mm512_andnot_ps(sign, v));
      p = _mm512_add_ps(p, v);
    }
    const float a = _mm512_reduce_max_ps(amax);
    d[g] = a / 127.0f;
    sx[g] = Tree16(p);
    const __m512 id = _mm512_set1_ps(a > 0.0f ? 127.0f / a : 0.0f);
    for (int64_t c = g * s.G; c < (g + 1) * s.G; c += 32) {  // 32 values: one group, one (even, odd) pair
      const __m512 lo = _mm512_loadu_ps(x + c), hi = _mm512_loadu_ps(x + c + 16);
      if (s.bits == 4) {
        const int64_t chunk = c / 128 * 128, v = c % 128 / 32;
        const __m512i qe = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_permutex2var_ps(lo, even, hi), id));
        const __m512i qo = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_permutex2var_ps(lo, odd, hi), id));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + chunk + v * 16), _mm512_cvtsepi32_epi8(qe));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + chunk + 64 + v * 16), _mm512_cvtsepi32_epi8(qo));
      } else {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + c), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(lo, id))));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + c + 16), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(hi, id))));
      }
    }
  }
}

// 16×16 transpose of i32 lanes: out[c] lane i = in[i] lane c.
HWY_INLINE void Transpose16(const __m512i (&in)[16], __m512i (&out)[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // u[4i + j], 128-bit block b: rows 4i..4i+3 of column 4b + j
    u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {  // 4×4 transpose of 128-bit blocks across u[j], u[4+j], u[8+j], u[12+j]
    const __m512i a0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), a1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i a2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44), a3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    out[0 + j] = _mm512_shuffle_i32x4(a0, a2, 0x88);
    out[4 + j] = _mm512_shuffle_i32x4(a0, a2, 0xDD);
    out[8 + j] = _mm512_shuffle_i32x4(a1, a3, 0x88);
    out[12 + j] = _mm512_shuffle_i32x4(a1, a3, 0xDD);
  }
}

// ng (<= 16) scales of dtype at p as f32 lanes, zero past ng (masked loads never fault).
HWY_INLINE __m512i LoadScales16(const void* p, DType dtype, int64_t ng) {
  const __mmask16 m = static_cast<__mmask16>((1u << ng) - 1u);
  switch (dtype) {
    case DType::bf16: return _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16);
    case DType::f16: return _mm512_castps_si512(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)));
    default: return _mm512_castps_si512(_mm512_maskz_loadu_ps(m, p));
  }
}

// Per-group f32 scales and biases of 16 weight rows, transposed into f32 records (int8_weight.h):
// rec[g * 32 + i] = scale(rows[i], g), rec[g * 32 + 16 + i] = bias(rows[i], g). For weights without
// prepared records (not prepared in int8 mode, MoE experts); prepared ones read their records.
void TransposeScales(const Weight& wt, const int64_t* rows, int64_t groups, float* HWY_RESTRICT rec) {
  const int64_t es = static_cast<int64_t>(dtype_size(wt.scales.dtype()));
  for (int which = 0; which < 2; ++which) {
    const Tensor& src = which == 0 ? wt.scales : wt.biases;
    float* dst = rec + which * 16;
    const char* base = static_cast<const char*>(src.raw());
    for (int64_t g0 = 0; g0 < groups; g0 += 16) {
      const int64_t ng = std::min<int64_t>(16, groups - g0);
      __m512i in[16], out[16];
      for (int i = 0; i < 16; ++i) in[i] = LoadScales16(base + (rows[i] * src.stride(0) + g0) * es, src.dtype(), ng);
      Transpose16(in, out);
      for (int64_t j = 0; j < ng; ++j) _mm512_storeu_ps(dst + (g0 + j) * 32, _mm512_castsi512_ps(out[j]));
    }
  }
}

// The record formats of int8_weight.h; kF32 is also the format TransposeScales writes.
enum class Rec { kBF16, kF16, kF32 };
template <Rec R>
constexpr int64_t kRecordBytes = R == Rec::kF32 ? 128 : 64;

// One record's 16 scales and 16 biases as f32 (exact widening).
template <Rec R>
HWY_INLINE void LoadRecord(const uint8_t* HWY_RESTRICT p, __m512& scale, __m512& bias) {
  if constexpr (R == Rec::kBF16) {
    const __m512i v = _mm512_loadu_si512(p);
    scale = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
    bias = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  } else if constexpr (R == Rec::kF16) {
    scale = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    bias = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
  } else {
    scale = _mm512_loadu_ps(p);
    bias = _mm512_loadu_ps(p + 64);
  }
}

HWY_INLINE __mmask64 BytesMask(int64_t valid) {
  return valid >= 64 ? ~__mmask64{0} : valid <= 0 ? __mmask64{0} : ((__mmask64{1} << valid) - 1);
}

// Software prefetch runs this many bytes ahead of the loads, one line per line consumed. In the
// checkpoint layout a block's 16 rows are read unit by unit, 16 lines spread over 16 rows (no
// sequential stream for the hardware prefetchers); rows are contiguous in checkpoints, so a cursor
// runs ahead through the thread's whole row range. The repacked layout (int8_weight.h) is one stream.
constexpr int64_t kPrefetchAhead = 4096;

// 16 per-row accumulators (lane L: the values of 128-bit block L/4) -> per-group sums, rows in lanes:
// out[q] lane i = sum of row i's lanes in group q of the unit (GPU groups per unit).
template <int GPU>
HWY_INLINE void GroupSums(const __m512i (&a)[16], __m512i (&out)[GPU]) {
  __m512i c[8], v[4];
  for (int i = 0; i < 8; ++i)  // block b: [r2i lanes 0+2, r2i+1 lanes 0+2, r2i lanes 1+3, r2i+1 lanes 1+3]
    c[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // block b: the block sums of rows 4i..4i+3
    v[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(c[2 * i], c[2 * i + 1]), _mm512_unpackhi_epi64(c[2 * i], c[2 * i + 1]));
  if constexpr (GPU == 4) {
    const __m512i u0 = _mm512_shuffle_i32x4(v[0], v[1], 0x44), u1 = _mm512_shuffle_i32x4(v[0], v[1], 0xEE);
    const __m512i u2 = _mm512_shuffle_i32x4(v[2], v[3], 0x44), u3 = _mm512_shuffle_i32x4(v[2], v[3], 0xEE);
    out[0] = _mm512_shuffle_i32x4(u0, u2, 0x88);
    out[1] = _mm512_shuffle_i32x4(u0, u2, 0xDD);
    out[2] = _mm512_shuffle_i32x4(u1, u3, 0x88);
    out[3] = _mm512_shuffle_i32x4(u1, u3, 0xDD);
  } else {
    const __m512i s01 = _mm512_add_epi32(_mm512_shuffle_i32x4(v[0], v[1], 0x88), _mm512_shuffle_i32x4(v[0], v[1], 0xDD));
    const __m512i s23 = _mm512_add_epi32(_mm512_shuffle_i32x4(v[2], v[3], 0x88), _mm512_shuffle_i32x4(v[2], v[3], 0xDD));
    if constexpr (GPU == 2) {
      out[0] = _mm512_shuffle_i32x4(s01, s23, 0x88);
      out[1] = _mm512_shuffle_i32x4(s01, s23, 0xDD);
    } else {
      out[0] = _mm512_add_epi32(_mm512_shuffle_i32x4(s01, s23, 0x88), _mm512_shuffle_i32x4(s01, s23, 0xDD));
    }
  }
}

// tot += one group's contribution for 16 (x row, weight row) pairs: rows in lanes; rec is the
// group's record of the 16 rows' scales and biases.
HWY_INLINE __m512 GroupStep(__m512 tot, __m512i isum, float d, float sx, __m512 scale, __m512 bias) {
  const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d));
  tot = _mm512_fmadd_ps(t, scale, tot);
  return _mm512_fmadd_ps(bias, _mm512_set1_ps(sx), tot);
}
template <Rec R>
HWY_INLINE __m512 GroupStep(__m512 tot, __m512i isum, float d, float sx, const uint8_t* HWY_RESTRICT rec) {
  __m512 scale, bias;
  LoadRecord<R>(rec, scale, bias);
  return GroupStep(tot, isum, d, sx, scale, bias);
}

HWY_INLINE const uint8_t* RowBytes(const Weight& wt, int64_t r) {
  return reinterpret_cast<const uint8_t*>(wt.data.data<const uint32_t>() + r * wt.data.stride(0));
}

// Mat-vec over weight rows [16 * b0, 16 * b1) (clamped to m; the last block repeats row m-1).
// kPacked: codes and records from the repacked weight pw (R: the records' format). Otherwise the
// checkpoint's rows, with records transposed per block into scratch (R = kF32).
template <int BITS, int GPU, Rec R, bool kPacked>
void MatVecBlocks(const Shape8& s, const Weight& wt, const Int8Weight* pw, const int8_t* HWY_RESTRICT xq, const float* HWY_RESTRICT d,
                  const float* HWY_RESTRICT sx, float* HWY_RESTRICT y, int64_t b0, int64_t b1) {
  thread_local std::vector<float> scratch;
  if (!kPacked) scratch.resize(static_cast<size_t>(32 * s.groups));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const bool contiguous = kPacked || wt.data.stride(0) * 4 == s.row_bytes;
  const uint8_t* pf;
  const uint8_t* pf_end;
  if constexpr (kPacked) {
    pf = pw->block_codes(b0) + kPrefetchAhead;
    pf_end = pw->block_codes(pw->blocks);
  } else {
    pf = RowBytes(wt, std::min(b0 * 16, wt.rows - 1)) + kPrefetchAhead;
    pf_end = RowBytes(wt, wt.rows - 1) + s.row_bytes;
  }
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* rp[16];
    const uint8_t* base = nullptr;  // kPacked: the block's codes; row i's step t at base + t * 1024 + i * 64
    const uint8_t* rec;
    if constexpr (kPacked) {
      base = pw->block_codes(b);
      rec = pw->record(b, 0);
    } else {
      int64_t rows[16];
      for (int i = 0; i < 16; ++i) {
        rows[i] = std::min(b * 16 + i, wt.rows - 1);
        rp[i] = RowBytes(wt, rows[i]);
      }
      TransposeScales(wt, rows, s.groups, scratch.data());
      rec = reinterpret_cast<const uint8_t*>(scratch.data());
    }
    // Row i's 64 bytes at byte offset o of the row.
    auto load = [&](int i, int64_t o, __mmask64 mask) {
      if constexpr (kPacked) return _mm512_load_si512(base + o * 16 + i * 64);
      else return _mm512_maskz_loadu_epi8(mask, rp[i] + o);
    };
    __m512 tot = _mm512_setzero_ps();
    for (int64_t u = 0; u < s.units; ++u) {
      __m512i acc[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_si512();
      for (int64_t l = 0; l < s.loads_per_unit; ++l) {
        const int64_t o = (u * s.loads_per_unit + l) * 64;
        const __mmask64 mask = kPacked ? ~__mmask64{0} : BytesMask(s.row_bytes - o);
        if (contiguous) {
          for (int i = 0; i < 16 && pf < pf_end; ++i, pf += 64) _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T0);
        } else {
          for (int i = 0; i < 16; ++i) _mm_prefetch(reinterpret_cast<const char*>(rp[i] + o + 1024), _MM_HINT_T0);
        }
        if constexpr (BITS == 4) {
          const __m512i xlo = _mm512_loadu_si512(xq + u * 128), xhi = _mm512_loadu_si512(xq + u * 128 + 64);
#pragma GCC unroll 16
          for (int i = 0; i < 16; ++i) {
            const __m512i wv = load(i, o, mask);
            acc[i] = _mm512_dpbusd_epi32(acc[i], _mm512_and_si512(wv, m4), xlo);
            acc[i] = _mm512_dpbusd_epi32(acc[i], _mm512_and_si512(_mm512_srli_epi16(wv, 4), m4), xhi);
          }
        } else {
          const __m512i xv = _mm512_loadu_si512(xq + o);
#pragma GCC unroll 16
          for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], load(i, o, mask), xv);
        }
      }
      __m512i sums[GPU];
      GroupSums<GPU>(acc, sums);
      for (int qg = 0; qg < GPU; ++qg) {
        const int64_t g = u * GPU + qg;
        if (g >= s.groups) break;
        tot = GroupStep<R>(tot, sums[qg], d[g], sx[g], rec + g * kRecordBytes<R>);
      }
    }
    const int64_t valid = std::min<int64_t>(16, wt.rows - b * 16);
    _mm512_mask_storeu_ps(y + b * 16, static_cast<__mmask16>((1u << valid) - 1u), tot);
  }
}

constexpr int kNX = 4;   // x rows per mat-mat register tile
constexpr int kNWB = 2;  // 16-row weight blocks per mat-mat panel (32 rows)

// Unpacks 16 weight rows into panel quads: panel[(j * kNWB + blk) * 64 + 4 * i + t] = code of row i at
// kernel-order position 4j + t. Row i's 64-byte step t is at rp[i] + t * tstride (64 in the checkpoint
// layout, 1024 in the repacked one); valid_bytes: the row's bytes (loaded with a mask past them).
template <int BITS>
void PackBlock(const Shape8& s, const uint8_t* const* rp, int64_t tstride, int64_t valid_bytes, int blk, uint8_t* HWY_RESTRICT panel) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const int64_t loads = s.kpad * BITS / 8 / 64;
  __m512i in[16], out[16];
  for (int64_t t = 0; t < loads; ++t) {
    const __mmask64 mask = BytesMask(valid_bytes - t * 64);
    for (int half = 0; half < (BITS == 4 ? 2 : 1); ++half) {
      for (int i = 0; i < 16; ++i) {
        __m512i wv = _mm512_maskz_loadu_epi8(mask, rp[i] + t * tstride);
        if constexpr (BITS == 4) wv = _mm512_and_si512(half == 0 ? wv : _mm512_srli_epi16(wv, 4), m4);
        in[i] = wv;
      }
      Transpose16(in, out);
      const int64_t j0 = BITS == 4 ? t * 32 + half * 16 : t * 16;
      for (int c = 0; c < 16; ++c) _mm512_storeu_si512(panel + ((j0 + c) * kNWB + blk) * 64, out[c]);
    }
  }
}

// NX x rows against the 32-row panel; y[x] + 16 * blk receives rows (valid lanes only).
// Group g's quads: 8-bit, [g*G/4, (g+1)*G/4); 4-bit, G/8 quads in the even half of its 128-value chunk
// and G/8 in the odd half (kernel order keeps even and odd values apart).
// rec[blk]: the block's records (group g at rec[blk] + g * kRecordBytes<R>).
template <int BITS, int NX, Rec R>
HWY_INLINE void PanelTile(const Shape8& s, const uint8_t* HWY_RESTRICT panel, const uint8_t* const (&rec)[kNWB], const int8_t* const* xq,
                          const float* const* d, const float* const* sx, float* const* y, const __mmask16 (&valid)[kNWB]) {
  __m512 tot[NX][kNWB];
  for (int x = 0; x < NX; ++x)
    for (int blk = 0; blk < kNWB; ++blk) tot[x][blk] = _mm512_setzero_ps();
  for (int64_t g = 0; g < s.groups; ++g) {
    __m512i acc[NX][kNWB];
    for (int x = 0; x < NX; ++x)
      for (int blk = 0; blk < kNWB; ++blk) acc[x][blk] = _mm512_setzero_si512();
    auto quads = [&](int64_t j0, int64_t j1) {
      const uint8_t* pj = panel + j0 * kNWB * 64;
      for (int64_t j = j0; j < j1; ++j, pj += kNWB * 64) {
        __m512i wv[kNWB];
        for (int blk = 0; blk < kNWB; ++blk) wv[blk] = _mm512_loadu_si512(pj + blk * 64);
        for (int x = 0; x < NX; ++x) {
          int32_t quad;
          std::memcpy(&quad, xq[x] + 4 * j, 4);
          const __m512i xb = _mm512_set1_epi32(quad);
          for (int blk = 0; blk < kNWB; ++blk) acc[x][blk] = _mm512_dpbusd_epi32(acc[x][blk], wv[blk], xb);
        }
      }
    };
    if constexpr (BITS == 4) {
      const int64_t base = g * s.G / 128 * 32 + g * s.G % 128 / 8, len = s.G / 8;
      quads(base, base + len);
      quads(base + 16, base + 16 + len);
    } else {
      quads(g * s.G / 4, (g + 1) * s.G / 4);
    }
    for (int x = 0; x < NX; ++x)
      for (int blk = 0; blk < kNWB; ++blk)
        tot[x][blk] = GroupStep<R>(tot[x][blk], acc[x][blk], d[x][g], sx[x][g], rec[blk] + g * kRecordBytes<R>);
  }
  for (int x = 0; x < NX; ++x)
    for (int blk = 0; blk < kNWB; ++blk) _mm512_mask_storeu_ps(y[x] + blk * 16, valid[blk], tot[x][blk]);
}

template <int BITS, Rec R, bool kPacked>
void MatMulPanels(const Shape8& s, const Weight& wt, const Int8Weight* pw, const XQ& xq, float* ybase, int64_t ystride, int64_t n,
                  int64_t p0, int64_t p1) {
  thread_local std::vector<uint8_t> panel_buf;
  thread_local std::vector<float> scale_buf;
  panel_buf.resize(static_cast<size_t>(s.kpad / 4 * kNWB * 64));
  if (!kPacked) scale_buf.resize(static_cast<size_t>(32 * kNWB * s.groups));
  for (int64_t p = p0; p < p1; ++p) {
    __mmask16 valid[kNWB];
    const uint8_t* rec[kNWB];
    for (int blk = 0; blk < kNWB; ++blk) {
      const int64_t r0 = (p * kNWB + blk) * 16;
      const int64_t nv = std::clamp<int64_t>(wt.rows - r0, 0, 16);
      valid[blk] = static_cast<__mmask16>((1u << nv) - 1u);
      const uint8_t* rp[16];
      if constexpr (kPacked) {
        const int64_t b = std::min(r0, wt.rows - 1) / 16;  // a block past the end repeats the last (no lane stored)
        for (int i = 0; i < 16; ++i) rp[i] = pw->block_codes(b) + i * 64;
        PackBlock<BITS>(s, rp, 1024, pw->loads * 64, blk, panel_buf.data());
        rec[blk] = pw->record(b, 0);
      } else {
        int64_t rows[16];
        for (int i = 0; i < 16; ++i) {
          rows[i] = std::min(r0 + i, wt.rows - 1);
          rp[i] = RowBytes(wt, rows[i]);
        }
        PackBlock<BITS>(s, rp, 64, s.row_bytes, blk, panel_buf.data());
        float* own = scale_buf.data() + blk * 32 * s.groups;
        TransposeScales(wt, rows, s.groups, own);
        rec[blk] = reinterpret_cast<const uint8_t*>(own);
      }
    }
    for (int64_t i = 0; i < n;) {
      const int nx = i + kNX <= n ? kNX : 1;
      const int8_t* xr[kNX];
      const float* dr[kNX];
      const float* sr[kNX];
      float* yr[kNX];
      for (int x = 0; x < nx; ++x) {
        xr[x] = xq.row(i + x);
        dr[x] = xq.scale(i + x);
        sr[x] = xq.sums(i + x);
        yr[x] = ybase + (i + x) * ystride + p * kNWB * 16;
      }
      if (nx == kNX) PanelTile<BITS, kNX, R>(s, panel_buf.data(), rec, xr, dr, sr, yr, valid);
      else PanelTile<BITS, 1, R>(s, panel_buf.data(), rec, xr, dr, sr, yr, valid);
      i += nx;
    }
  }
}

// The record format of a repacked weight (its scale dtype).
Rec RecordFormat(const Int8Weight& pw) {
  switch (pw.dtype) {
    case DType::bf16: return Rec::kBF16;
    case DType::f16: return Rec::kF16;
    default: return Rec::kF32;
  }
}

// x row i's mat-vec over weight blocks [b0, b1) into y (that row's output).
template <int BITS, Rec R, bool kPacked>
void MatVecRange(const Shape8& s, const Weight& wt, const Int8Weight* pw, const XQ& xq, int64_t i, float* y, int64_t b0, int64_t b1) {
  switch (s.groups_per_unit) {
    case 1: MatVecBlocks<BITS, 1, R, kPacked>(s, wt, pw, xq.row(i), xq.scale(i), xq.sums(i), y, b0, b1); break;
    case 2: MatVecBlocks<BITS, 2, R, kPacked>(s, wt, pw, xq.row(i), xq.scale(i), xq.sums(i), y, b0, b1); break;
    default: MatVecBlocks<BITS, 4, R, kPacked>(s, wt, pw, xq.row(i), xq.scale(i), xq.sums(i), y, b0, b1); break;
  }
}

// A decode batch (2 <= n <= kTileRows): each 16-row weight block is loaded, transposed to rows in
// lanes and unpacked once per unit, then applied to every x row, so the weights are read and unpacked
// once per call rather than once per row. The unit's entries w[e] (e < unit / 4) hold one dword of
// codes per weight row (lane i: row i), in x order:
//   4-bit: w[2c], w[2c + 1]: the even and odd values of the row's packed dword c, against the x
//     bytes 4c and 64 + 4c of the unit (kernel order);
//   8-bit: w[16l + c]: dword c of load l, against the x bytes 64l + 4c of the unit.
// Either way entry e holds values of group e * 4 / G of the unit, G / 4 entries a group. Each x row
// broadcasts its dword against the entry, so a group's integer sums come out with rows in lanes and
// the f32 steps are GroupStep's, in the mat-vec's order: each row keeps the bits it has alone.
constexpr int64_t kTileRows = 16;
constexpr int kRowTile = 4;  // x rows per register tile

// x rows [i0, i0 + NX) against unit u's entries w; tot[x * 16 ..] (rows in lanes) receives the groups.
// G fixed at compile time, so a group's entries unroll with their x offsets as constants; even and
// odd entries go to separate accumulators (twice the independent dpbusd chains; integer sums, so
// the split changes no bits).
template <int BITS, int NX, Rec R, int G>
HWY_INLINE void RowsTile(const Shape8& s, const __m512i* HWY_RESTRICT w, int64_t u, const uint8_t* HWY_RESTRICT rec, const XQ& xq,
                         int64_t i0, float* HWY_RESTRICT tot) {
  constexpr int kPairs = G / 8;  // (even, odd) entry pairs a group
  const int64_t ng = std::min(s.groups_per_unit, s.groups - u * s.groups_per_unit);
  const int8_t* xr[NX];
  for (int x = 0; x < NX; ++x) xr[x] = xq.row(i0 + x) + u * s.unit;
  for (int64_t q = 0; q < ng; ++q) {
    __m512i acc[2][NX];
    for (int x = 0; x < NX; ++x) acc[0][x] = acc[1][x] = _mm512_setzero_si512();
    const __m512i* wq = w + q * 2 * kPairs;
    const int64_t xo = q * 2 * kPairs * (BITS == 4 ? 2 : 4);  // the group's first x byte in the unit
#pragma GCC unroll 4
    for (int c = 0; c < kPairs; ++c) {
      // x bytes of the pair's entries (2c, 2c + 1 of the group): 4-bit 4c and 64 + 4c, 8-bit 8c and 8c + 4.
      const int o0 = BITS == 4 ? 4 * c : 8 * c, o1 = BITS == 4 ? 64 + 4 * c : 8 * c + 4;
      const __m512i w0 = _mm512_load_si512(wq + 2 * c), w1 = _mm512_load_si512(wq + 2 * c + 1);
      for (int x = 0; x < NX; ++x) {  // broadcasts straight from memory (vpbroadcastd m32)
        acc[0][x] = _mm512_dpbusd_epi32(acc[0][x], w0, _mm512_broadcastd_epi32(_mm_loadu_si32(xr[x] + xo + o0)));
        acc[1][x] = _mm512_dpbusd_epi32(acc[1][x], w1, _mm512_broadcastd_epi32(_mm_loadu_si32(xr[x] + xo + o1)));
      }
    }
    const int64_t g = u * s.groups_per_unit + q;
    __m512 scale, bias;  // the group's record, widened once for the tile's rows
    LoadRecord<R>(rec + g * kRecordBytes<R>, scale, bias);
    for (int x = 0; x < NX; ++x) {
      float* t = tot + (i0 + x) * 16;
      const __m512i isum = _mm512_add_epi32(acc[0][x], acc[1][x]);
      _mm512_store_ps(t, GroupStep(_mm512_load_ps(t), isum, xq.scale(i0 + x)[g], xq.sums(i0 + x)[g], scale, bias));
    }
  }
}

// Every x row (n) against unit u's entries, kRowTile rows at a time.
template <int BITS, Rec R, int G>
void RowsOfUnit(const Shape8& s, const __m512i* HWY_RESTRICT w, int64_t u, const uint8_t* HWY_RESTRICT rec, const XQ& xq, int64_t n,
                float* HWY_RESTRICT tot) {
  int64_t i = 0;
  for (; i + kRowTile <= n; i += kRowTile) RowsTile<BITS, kRowTile, R, G>(s, w, u, rec, xq, i, tot);
  switch (n - i) {
    case 1: RowsTile<BITS, 1, R, G>(s, w, u, rec, xq, i, tot); break;
    case 2: RowsTile<BITS, 2, R, G>(s, w, u, rec, xq, i, tot); break;
    case 3: RowsTile<BITS, 3, R, G>(s, w, u, rec, xq, i, tot); break;
    default: break;
  }
}

// n x rows (n <= kTileRows) over weight blocks [b0, b1): y row i at ybase + i * ystride.
template <int BITS, Rec R, bool kPacked>
void MatVecTiles(const Shape8& s, const Weight& wt, const Int8Weight* pw, const XQ& xq, int64_t n, float* ybase, int64_t ystride,
                 int64_t b0, int64_t b1) {
  thread_local std::vector<float> scratch;
  if (!kPacked) scratch.resize(static_cast<size_t>(32 * s.groups));
  alignas(64) float tot[kTileRows * 16];
  alignas(64) __m512i w[32];  // one unit's entries: unit / 4 <= 32
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const bool contiguous = kPacked || wt.data.stride(0) * 4 == s.row_bytes;
  const uint8_t* pf;
  const uint8_t* pf_end;
  if constexpr (kPacked) {
    pf = pw->block_codes(b0) + kPrefetchAhead;
    pf_end = pw->block_codes(pw->blocks);
  } else {
    pf = RowBytes(wt, std::min(b0 * 16, wt.rows - 1)) + kPrefetchAhead;
    pf_end = RowBytes(wt, wt.rows - 1) + s.row_bytes;
  }
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* rp[16];
    const uint8_t* base = nullptr;
    const uint8_t* rec;
    if constexpr (kPacked) {
      base = pw->block_codes(b);
      rec = pw->record(b, 0);
    } else {
      int64_t rows[16];
      for (int i = 0; i < 16; ++i) {
        rows[i] = std::min(b * 16 + i, wt.rows - 1);
        rp[i] = RowBytes(wt, rows[i]);
      }
      TransposeScales(wt, rows, s.groups, scratch.data());
      rec = reinterpret_cast<const uint8_t*>(scratch.data());
    }
    std::fill(tot, tot + n * 16, 0.0f);
    for (int64_t u = 0; u < s.units; ++u) {
      for (int64_t l = 0; l < s.loads_per_unit; ++l) {
        const int64_t o = (u * s.loads_per_unit + l) * 64;
        if (contiguous) {
          for (int i = 0; i < 16 && pf < pf_end; ++i, pf += 64) _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T0);
        } else {
          for (int i = 0; i < 16; ++i) _mm_prefetch(reinterpret_cast<const char*>(rp[i] + o + 1024), _MM_HINT_T0);
        }
        __m512i in[16], out[16];
        if constexpr (kPacked) {
          for (int i = 0; i < 16; ++i) in[i] = _mm512_load_si512(base + o * 16 + i * 64);
        } else {
          const __mmask64 mask = BytesMask(s.row_bytes - o);
          for (int i = 0; i < 16; ++i) in[i] = _mm512_maskz_loadu_epi8(mask, rp[i] + o);
        }
        Transpose16(in, out);
        if constexpr (BITS == 4) {
          for (int c = 0; c < 16; ++c) {
            w[2 * c] = _mm512_and_si512(out[c], m4);
            w[2 * c + 1] = _mm512_and_si512(_mm512_srli_epi16(out[c], 4), m4);
          }
        } else {
          for (int c = 0; c < 16; ++c) w[l * 16 + c] = out[c];
        }
      }
      switch (s.G) {
        case 32: RowsOfUnit<BITS, R, 32>(s, w, u, rec, xq, n, tot); break;
        case 64: RowsOfUnit<BITS, R, 64>(s, w, u, rec, xq, n, tot); break;
        default: RowsOfUnit<BITS, R, 128>(s, w, u, rec, xq, n, tot); break;
      }
    }
    const int64_t valid = std::min<int64_t>(16, wt.rows - b * 16);
    for (int64_t i = 0; i < n; ++i)
      _mm512_mask_storeu_ps(ybase + i * ystride + b * 16, static_cast<__mmask16>((1u << valid) - 1u), _mm512_load_ps(tot + i * 16));
  }
}

template <int BITS>
void VnniRun(const Tensor& x, const Weight& wt, Tensor& y) {
  const int64_t n = x.dim(0), m = wt.rows;
  const Shape8 s = MakeShape8(BITS, wt.cols, wt.quant.group_size);
  XQ xq(n, s.kpad, s.groups);
  ThreadPool& pool = compute_pool();
  auto quantize = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      QuantizeRowV(s, x.data<const float>() + i * x.stride(0), xq.q + i * s.kpad, xq.d + i * s.groups, xq.sx + i * s.groups);
  };
  float* ybase = y.data<float>();
  const Int8Weight* pw = int8_weight(wt);
  if (n <= kTileRows) {
    quantize(0, n);
    const int64_t blocks = (m + 15) / 16;
    const int64_t grain = std::max<int64_t>(1, 2048 / std::max<int64_t>(s.k, 1));
    const int64_t ys = y.stride(0);
    pool.parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
      if (n == 1) {
        if (!pw) return MatVecRange<BITS, Rec::kF32, false>(s, wt, pw, xq, 0, ybase, b0, b1);
        switch (RecordFormat(*pw)) {
          case Rec::kBF16: MatVecRange<BITS, Rec::kBF16, true>(s, wt, pw, xq, 0, ybase, b0, b1); break;
          case Rec::kF16: MatVecRange<BITS, Rec::kF16, true>(s, wt, pw, xq, 0, ybase, b0, b1); break;
          default: MatVecRange<BITS, Rec::kF32, true>(s, wt, pw, xq, 0, ybase, b0, b1); break;
        }
        return;
      }
      if (!pw) return MatVecTiles<BITS, Rec::kF32, false>(s, wt, pw, xq, n, ybase, ys, b0, b1);
      switch (RecordFormat(*pw)) {
        case Rec::kBF16: MatVecTiles<BITS, Rec::kBF16, true>(s, wt, pw, xq, n, ybase, ys, b0, b1); break;
        case Rec::kF16: MatVecTiles<BITS, Rec::kF16, true>(s, wt, pw, xq, n, ybase, ys, b0, b1); break;
        default: MatVecTiles<BITS, Rec::kF32, true>(s, wt, pw, xq, n, ybase, ys, b0, b1); break;
      }
    });
    return;
  }
  pool.parallel_for(n, 16, quantize);
  const int64_t panels = (m + 16 * kNWB - 1) / (16 * kNWB);
  pool.parallel_for(panels, 1, [&](int64_t p0, int64_t p1) {
    if (!pw) return MatMulPanels<BITS, Rec::kF32, false>(s, wt, pw, xq, ybase, y.stride(0), n, p0, p1);
    switch (RecordFormat(*pw)) {
      case Rec::kBF16: MatMulPanels<BITS, Rec::kBF16, true>(s, wt, pw, xq, ybase, y.stride(0), n, p0, p1); break;
      case Rec::kF16: MatMulPanels<BITS, Rec::kF16, true>(s, wt, pw, xq, ybase, y.stride(0), n, p0, p1); break;
      default: MatMulPanels<BITS, Rec::kF32, true>(s, wt, pw, xq, ybase, y.stride(0), n, p0, p1); break;
    }
  });
}

bool CpuHasVnni() {
  static const bool has = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
  return has;
}
#endif  // SANCTUM_INT8_VNNI

// Whether this target's kernels read the repacked form of int8_weight.h (the VNNI ones); the portable
// loops read the checkpoint's layout.
bool ReadsInt8Repack() {
#if SANCTUM_INT8_VNNI
  return CpuHasVnni();
#else
  return false;
#endif
}

void MatmulQuantizedInt8(const Tensor& x, const Weight& w, Tensor& y) {
#if SANCTUM_INT8_VNNI
  if (CpuHasVnni()) {
    if (w.quant.bits == 4) VnniRun<4>(x, w, y);
    else VnniRun<8>(x, w, y);
    return;
  }
#endif
  GenericRun(x, w, y);
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(MatmulQuantizedInt8);
HWY_EXPORT(ReadsInt8Repack);

void matmul_quantized_int8(const Tensor& x, const Weight& w, Tensor& y) { HWY_DYNAMIC_DISPATCH(MatmulQuantizedInt8)(x, w, y); }

bool int8_vnni_available() { return HWY_DYNAMIC_DISPATCH(ReadsInt8Repack)(); }

namespace {
// The repacked form of int8_weight.h; loads as the kernels' Shape8 counts them: 64-byte steps covering
// whole units of max(512 / bits, G) values.
std::shared_ptr<Int8Weight> repack_int8(const Weight& w) {
  auto out = std::make_shared<Int8Weight>();
  const int bits = w.quant.bits;
  const int64_t step = 512 / bits, unit = std::max<int64_t>(step, w.quant.group_size);
  const int64_t row_bytes = w.cols * bits / 8;
  const DType dt = w.scales.dtype();
  out->rows = w.rows;
  out->groups = w.cols / w.quant.group_size;
  out->blocks = (w.rows + 15) / 16;
  out->loads = (w.cols + unit - 1) / unit * (unit / step);
  out->dtype = dt;
  out->record_bytes = dt == DType::f32 ? 128 : 64;
  // Mapped on its own rather than taken from malloc, so the model's worth of copies leaves the heap's
  // layout (and its fragmentation around the activations) as it was. Huge pages where the system has
  // them (transparent_hugepage=madvise): the copy is streamed every token, and the hardware
  // prefetchers stop at page boundaries (1 thread: 57 -> 65 tok/s on the 0.5B shape).
  const size_t code_bytes = static_cast<size_t>(out->blocks * out->loads * 1024);
  const size_t bytes = code_bytes + static_cast<size_t>(out->blocks * out->groups * out->record_bytes);
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  check(mem != MAP_FAILED, ErrorKind::io,
        "out of memory repacking weight '" + w.name + "' for int8 matmuls (" + std::to_string(bytes) + " bytes)");
  ::madvise(mem, bytes, MADV_HUGEPAGE);  // advice only: without huge pages nothing changes
  count_weight_copy(static_cast<int64_t>(bytes));
  out->storage = std::shared_ptr<void>(mem, [bytes](void* p) {
    ::munmap(p, bytes);
    count_weight_copy(-static_cast<int64_t>(bytes));
  });
  uint8_t* codes_out = static_cast<uint8_t*>(mem);
  uint8_t* records_out = codes_out + code_bytes;
  out->codes = codes_out;
  out->records = records_out;
  const int64_t es = static_cast<int64_t>(dtype_size(dt));
  const char* sbase = static_cast<const char*>(w.scales.raw());
  const char* bbase = static_cast<const char*>(w.biases.raw());
  for (int64_t b = 0; b < out->blocks; ++b)
    for (int i = 0; i < 16; ++i) {
      const int64_t r = std::min(b * 16 + i, w.rows - 1);
      const uint8_t* row = reinterpret_cast<const uint8_t*>(w.data.data<const uint32_t>() + r * w.data.stride(0));
      uint8_t* codes = codes_out + b * out->loads * 1024 + i * 64;
      for (int64_t t = 0; t < out->loads && t * 64 < row_bytes; ++t)
        std::memcpy(codes + t * 1024, row + t * 64, static_cast<size_t>(std::min<int64_t>(64, row_bytes - t * 64)));
      const char* srow = sbase + r * w.scales.stride(0) * es;
      const char* brow = bbase + r * w.biases.stride(0) * es;
      for (int64_t g = 0; g < out->groups; ++g) {
        uint8_t* rec = records_out + (b * out->groups + g) * out->record_bytes;
        if (dt == DType::bf16) {
          uint16_t sv, bv;
          std::memcpy(&sv, srow + g * 2, 2);
          std::memcpy(&bv, brow + g * 2, 2);
          const uint32_t word = static_cast<uint32_t>(sv) << 16 | bv;
          std::memcpy(rec + i * 4, &word, 4);
        } else {
          std::memcpy(rec + i * es, srow + g * es, static_cast<size_t>(es));
          std::memcpy(rec + (16 + i) * es, brow + g * es, static_cast<size_t>(es));
        }
      }
    }
  return out;
}
}  // namespace

void prepare_weight_int8(Weight& w) {
  if (!w.quantized() || w.rows == 0 || w.packed || !HWY_DYNAMIC_DISPATCH(ReadsInt8Repack)()) return;
  w.packed = repack_int8(w);
  // Nothing reads the checkpoint's copy in int8 mode any more (int8_weight.h): hand its pages back.
  for (const Tensor* t : {&w.data, &w.scales, &w.biases})
    if (t->is_contiguous()) release_mapped_pages(t->raw(), t->nbytes());
}

}  // namespace sanctum::ops::cpu
#endif

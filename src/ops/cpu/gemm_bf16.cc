// bf16-operand GEMMs for the chunked GatedDeltaNet (see gemm_bf16.h). AVX512_BF16 intrinsics under
// a function target attribute, picked at run time: the rest of the build keeps its baseline ISA.
#include "ops/cpu/gemm_bf16.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "hwy/base.h"

#if defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 9 : __GNUC__ >= 10)
#define SANCTUM_BF16_GEMM 1
#include <immintrin.h>
#else
#define SANCTUM_BF16_GEMM 0
#endif

namespace sanctum::ops::cpu {

#if SANCTUM_BF16_GEMM

bool bf16_gemm_available() {
  // libgcc / compiler-rt report AVX-512 features only when the OS saves the zmm state.
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return has;
}

HWY_PUSH_ATTRIBUTES("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16")
namespace {

constexpr int64_t kLanes = 16;  // f32 lanes (and bf16 pairs) per 512-bit vector
// Tile: kMR rows x kNV vectors of accumulators (16), 2 vectors of B per reduction pair, A's pair
// broadcast from memory.
constexpr int kMR = 8, kNV = 2;

__mmask16 first_lanes(int64_t count) {
  return count >= kLanes ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1u);
}

// 16 floats (masked lanes read as 0) times scale, rounded to bf16 (nearest even), zero-extended to
// 32-bit lanes. (The maskz forms with a full mask: GCC 12 flags the unmasked ones' undefined
// pass-through operand.)
__m512i bf16_lanes(const float* p, __mmask16 mask, __m512 scale) {
  const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, p), scale);
  return _mm512_maskz_cvtepu16_epi32(0xffff, (__m256i)_mm512_cvtneps_pbh(x));
}

// Where a product goes: C (ldc) = A B + c_scale C, and optionally the new C's rows as a B operand
// (pairs, ldp words; rows 2p, 2p+1 of C in pair row p).
struct Dest {
  float* C;
  int64_t ldc;
  float c_scale;
  uint32_t* pairs;
  int64_t ldp;
  const float* c_in = nullptr;  // the old C, if not C itself (ldci)
  int64_t ldci = 0;
  const float* row_scale = nullptr;  // per row of C, instead of c_scale
  bool stream = false;               // non-temporal stores (C's rows 64-byte aligned)
};

template <int MR, int NV>
void tile(const uint16_t* A, int64_t lda, const uint32_t* B, int64_t ldb, const Dest& d, int64_t pairs) {
  __m512 c[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) c[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh b[NV];
    for (int v = 0; v < NV; ++v) b[v] = (__m512bh)_mm512_loadu_si512(B + p * ldb + v * kLanes);
    for (int r = 0; r < MR; ++r) {
      uint32_t w;
      std::memcpy(&w, A + r * lda + 2 * p, sizeof(w));
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(w));
      for (int v = 0; v < NV; ++v) c[r][v] = _mm512_dpbf16_ps(c[r][v], a, b[v]);
    }
  }
  const bool read = d.row_scale || d.c_scale != 0.0f;
  for (int r = 0; r < MR; ++r) {
    const __m512 scale = _mm512_set1_ps(d.row_scale ? d.row_scale[r] : d.c_scale);
    const float* cin = d.c_in ? d.c_in + r * d.ldci : d.C + r * d.ldc;
    for (int v = 0; v < NV; ++v) {
      float* cp = d.C + r * d.ldc + v * kLanes;
      if (read) c[r][v] = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(cin + v * kLanes), scale), c[r][v]);
      if (d.stream) _mm512_stream_ps(cp, c[r][v]);
      else _mm512_storeu_ps(cp, c[r][v]);
    }
  }
  if (d.pairs)
    for (int r = 0; r < MR; r += 2)
      for (int v = 0; v < NV; ++v) {
        const __m512i lo = _mm512_maskz_cvtepu16_epi32(0xffff, (__m256i)_mm512_cvtneps_pbh(c[r][v]));
        const __m512i hi =
            r + 1 < MR ? _mm512_maskz_cvtepu16_epi32(0xffff, (__m256i)_mm512_cvtneps_pbh(c[r + 1][v])) : _mm512_setzero_si512();
        _mm512_storeu_si512(d.pairs + r / 2 * d.ldp + v * kLanes, _mm512_or_si512(lo, _mm512_maskz_slli_epi32(0xffff, hi, 16)));
      }
}

template <int MR>
void rows(int nv, const uint16_t* A, int64_t lda, const uint32_t* B, int64_t ldb, const Dest& d, int64_t pairs) {
  if (nv >= 2) return tile<MR, 2>(A, lda, B, ldb, d, pairs);
  tile<MR, 1>(A, lda, B, ldb, d, pairs);
}

void pack_rows(const float* src, int64_t lds, int64_t n_rows, int64_t kk, uint16_t* dst, int64_t ldd, float scale) {
  const __m512 vs = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n_rows; ++i) {
    const float* s = src + i * lds;
    uint16_t* d = dst + i * ldd;
    for (int64_t c = 0; c < kk; c += kLanes) {
      const __mmask16 m = first_lanes(kk - c);
      _mm256_mask_storeu_epi16(d + c, m, (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + c), vs)));
    }
    if (kk % 2) d[kk] = 0;
  }
}

void pack_pairs(const float* src, int64_t lds, int64_t kk, int64_t n, uint32_t* dst, int64_t ldd, const float* row_scale) {
  for (int64_t p = 0; 2 * p < kk; ++p) {
    const float* lo = src + 2 * p * lds;
    const float* hi = lo + lds;
    const bool has_hi = 2 * p + 1 < kk;
    const __mmask16 hi_mask = has_hi ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>(0);
    const __m512 s_lo = _mm512_set1_ps(row_scale ? row_scale[2 * p] : 1.0f),
                 s_hi = _mm512_set1_ps(row_scale && has_hi ? row_scale[2 * p + 1] : 1.0f);
    uint32_t* d = dst + p * ldd;
    for (int64_t j = 0; j < n; j += kLanes) {
      const __m512i word =
          _mm512_or_si512(bf16_lanes(lo + j, 0xffff, s_lo), _mm512_maskz_slli_epi32(0xffff, bf16_lanes(hi + j, hi_mask, s_hi), 16));
      _mm512_storeu_si512(d + j, word);
    }
  }
}

// 16 x 16 transpose of 32-bit words in registers: r[i] (row i) becomes column i. (maskz forms with
// full masks, as in bf16_lanes.)
void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved within 128-bit lanes
    t[i] = _mm512_maskz_unpacklo_epi32(0xffff, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_epi32(0xffff, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // lane l of r[i + c]: column 4l + c of rows i..i+3
    r[i] = _mm512_maskz_unpacklo_epi64(0xff, t[i], t[i + 2]);
    r[i + 1] = _mm512_maskz_unpackhi_epi64(0xff, t[i], t[i + 2]);
    r[i + 2] = _mm512_maskz_unpacklo_epi64(0xff, t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_maskz_unpackhi_epi64(0xff, t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 16; i += 8)  // then whole lanes across 4 and 8 rows
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_maskz_shuffle_i32x4(0xffff, r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_maskz_shuffle_i32x4(0xffff, r[i + j], r[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_maskz_shuffle_i32x4(0xffff, t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_maskz_shuffle_i32x4(0xffff, t[j], t[j + 8], 0xdd);
  }
}

void pairs_of_transpose(const uint16_t* A, int64_t lda, int64_t m, int64_t kk, uint32_t* dst, int64_t ldd, int64_t n) {
  const int64_t pairs = (kk + 1) / 2;
  for (int64_t j0 = 0; j0 < n; j0 += kLanes)
    for (int64_t p0 = 0; p0 < pairs; p0 += kLanes) {
      const __mmask16 cols = first_lanes(pairs - p0);
      __m512i r[16];
      for (int64_t j = 0; j < kLanes; ++j)
        r[j] = j0 + j < m ? _mm512_maskz_loadu_epi32(cols, A + (j0 + j) * lda + 2 * p0) : _mm512_setzero_si512();
      transpose16(r);
      for (int64_t p = 0; p < std::min<int64_t>(kLanes, pairs - p0); ++p) _mm512_storeu_si512(dst + (p0 + p) * ldd + j0, r[p]);
    }
}

void unpack_pairs(const uint32_t* B, int64_t ldb, int64_t kk, int64_t n, uint16_t* dst, int64_t ldd) {
  for (int64_t p = 0; 2 * p < kk; ++p)
    for (int64_t j = 0; j < n; j += kLanes) {
      const __m512i w = _mm512_loadu_si512(B + p * ldb + j);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * p * ldd + j), _mm512_maskz_cvtepi32_epi16(0xffff, w));
      if (2 * p + 1 < kk)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (2 * p + 1) * ldd + j),
                            _mm512_maskz_cvtepi32_epi16(0xffff, _mm512_maskz_srli_epi32(0xffff, w, 16)));
    }
}

void gemm(int64_t m, int64_t n, int64_t kk, const uint16_t* A, int64_t lda, const uint32_t* B, int64_t ldb, const Dest& dest, bool lower_a,
          bool lower_c) {
  const int64_t nvec = n / kLanes;
  // Column panels outer: a panel of B stays in L1 while the row blocks pass.
  for (int64_t v0 = 0; v0 < nvec; v0 += kNV) {
    const int nv = static_cast<int>(std::min<int64_t>(kNV, nvec - v0));
    for (int64_t i0 = 0; i0 < m; i0 += kMR) {
      const int64_t mr = std::min<int64_t>(kMR, m - i0);
      const int64_t need = lower_c ? std::min<int64_t>(nv, (i0 + mr + kLanes - 1) / kLanes - v0) : nv;
      if (need <= 0) continue;
      // lower_a: the reduction ends at these rows' last column (rounded up to a whole pair, whose
      // second half is zero in every row here).
      const int64_t pairs = ((lower_a ? std::min(kk, i0 + mr) : kk) + 1) / 2;
      const uint16_t* a = A + i0 * lda;
      const uint32_t* b = B + v0 * kLanes;
      // i0 is even (kMR is), so the tile's row pairs are C's.
      const Dest d{dest.C + i0 * dest.ldc + v0 * kLanes,
                   dest.ldc,
                   dest.c_scale,
                   dest.pairs ? dest.pairs + i0 / 2 * dest.ldp + v0 * kLanes : nullptr,
                   dest.ldp,
                   dest.c_in ? dest.c_in + i0 * dest.ldci + v0 * kLanes : nullptr,
                   dest.ldci,
                   dest.row_scale ? dest.row_scale + i0 : nullptr,
                   dest.stream};
      const int nvr = static_cast<int>(need);
      switch (mr) {
        case 1: rows<1>(nvr, a, lda, b, ldb, d, pairs); break;
        case 2: rows<2>(nvr, a, lda, b, ldb, d, pairs); break;
        case 3: rows<3>(nvr, a, lda, b, ldb, d, pairs); break;
        case 4: rows<4>(nvr, a, lda, b, ldb, d, pairs); break;
        case 5: rows<5>(nvr, a, lda, b, ldb, d, pairs); break;
        case 6: rows<6>(nvr, a, lda, b, ldb, d, pairs); break;
        case 7: rows<7>(nvr, a, lda, b, ldb, d, pairs); break;
        default: rows<kMR>(nvr, a, lda, b, ldb, d, pairs); break;
      }
    }
  }
  if (dest.stream) _mm_sfence();  // the streamed lines ordered before anything after the product
}

}  // namespace
HWY_POP_ATTRIBUTES

void pack_rows_bf16(const float* src, int64_t lds, int64_t n_rows, int64_t kk, uint16_t* dst, int64_t ldd, float scale) {
  pack_rows(src, lds, n_rows, kk, dst, ldd, scale);
}

void pack_pairs_bf16(const float* src, int64_t lds, int64_t kk, int64_t n, uint32_t* dst, int64_t ldd, const float* row_scale) {
  SANCTUM_CHECK(n % kLanes == 0, ErrorKind::internal, "pack_pairs_bf16: n must be a multiple of 16");
  pack_pairs(src, lds, kk, n, dst, ldd, row_scale);
}

void pairs_of_transpose_bf16(const uint16_t* A, int64_t lda, int64_t m, int64_t kk, uint32_t* dst, int64_t ldd, int64_t n) {
  SANCTUM_CHECK(n % kLanes == 0 && lda % 2 == 0, ErrorKind::internal, "pairs_of_transpose_bf16: n must be a multiple of 16 and lda even");
  pairs_of_transpose(A, lda, m, kk, dst, ldd, n);
}

void unpack_pairs_bf16(const uint32_t* B, int64_t ldb, int64_t kk, int64_t n, uint16_t* dst, int64_t ldd) {
  SANCTUM_CHECK(n % kLanes == 0, ErrorKind::internal, "unpack_pairs_bf16: n must be a multiple of 16");
  unpack_pairs(B, ldb, kk, n, dst, ldd);
}

void gemm_bf16(int64_t m, int64_t n, int64_t kk, const uint16_t* A, int64_t lda, const uint32_t* B, int64_t ldb, float* C, int64_t ldc,
               float c_scale, bool lower_a, bool lower_c, uint32_t* c_pairs, int64_t ldcp, const GemmBf16Extra* extra) {
  SANCTUM_CHECK(n % kLanes == 0, ErrorKind::internal, "gemm_bf16: n must be a multiple of 16");
  Dest d{C, ldc, c_scale, c_pairs, ldcp};
  if (extra) {
    d.c_in = extra->c_in;
    d.ldci = extra->ldc_in;
    d.row_scale = extra->c_row_scale;
    SANCTUM_CHECK(!extra->stream || extra->c_in || (c_scale == 0.0f && !extra->c_row_scale), ErrorKind::internal,
                  "gemm_bf16: streamed stores need the old C from c_in");
    // Whole aligned lines only: every tile's rows then start on a line (tiles are 16-float columns).
    d.stream = extra->stream && reinterpret_cast<uintptr_t>(C) % 64 == 0 && ldc % kLanes == 0;
  }
  gemm(m, n, kk, A, lda, B, ldb, d, lower_a, lower_c);
}

#else  // no AVX512_BF16 in this build: callers take their f32 path.

namespace {
[[noreturn]] void unavailable() { fail(ErrorKind::internal, "bf16 GEMM called in a build without AVX512_BF16"); }
}  // namespace

bool bf16_gemm_available() { return false; }
void pack_rows_bf16(const float*, int64_t, int64_t, int64_t, uint16_t*, int64_t, float) { unavailable(); }
void pack_pairs_bf16(const float*, int64_t, int64_t, int64_t, uint32_t*, int64_t, const float*) { unavailable(); }
void pairs_of_transpose_bf16(const uint16_t*, int64_t, int64_t, int64_t, uint32_t*, int64_t, int64_t) { unavailable(); }
void unpack_pairs_bf16(const uint32_t*, int64_t, int64_t, int64_t, uint16_t*, int64_t) { unavailable(); }
void gemm_bf16(int64_t, int64_t, int64_t, const uint16_t*, int64_t, const uint32_t*, int64_t, float*, int64_t, float, bool, bool, uint32_t*,
               int64_t, const GemmBf16Extra*) {
  unavailable();
}

#endif

}  // namespace sanctum::ops::cpu

// The bf16-operand GEMM of the chunked GatedDeltaNet's fast mode (ops/cpu/gemm_bf16.h) against its
// scalar twin (ops/ref/gemm_bf16.h) on fresh random data, at sizes around the vector width, odd
// reduction lengths, leading dims wider than the rows, and the triangular variants.
#include "ops/cpu/gemm_bf16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "ops/ref/gemm_bf16.h"

namespace sanctum::ops {
namespace {

using test::Rng;

struct Case {
  int64_t m, n, kk;
  float c_scale;  // C = A B + c_scale C
  bool lower_a, lower_c;
  bool row_scale = false;  // B's rows scaled while packing
  float a_scale = 1.0f;    // A's rows scaled while packing
  bool c_pairs = false;    // the new C also as a B operand
};

std::string name(const Case& c) {
  return "m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " kk " + std::to_string(c.kk) + " c_scale " +
         std::to_string(c.c_scale) + (c.lower_a ? " lower_a" : "") + (c.lower_c ? " lower_c" : "") + (c.row_scale ? " row_scale" : "") +
         " a_scale " + std::to_string(c.a_scale) + (c.c_pairs ? " c_pairs" : "");
}

// Runs one case and returns the largest error in units of its bound (must stay <= 1).
double check(const Case& c, Rng& rng) {
  const int64_t lda = c.kk + 3, ldb = c.n + 16, ldc = c.n + 16, ldp = c.kk + 5 + (c.kk + 5) % 2;
  std::vector<float> A(static_cast<size_t>(c.m * lda)), B(static_cast<size_t>(c.kk * ldb)), C(static_cast<size_t>(c.m * ldc));
  // Magnitudes spread over a few decades, as the chunk's decayed products are.
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t p = 0; p < c.kk; ++p)
      A[static_cast<size_t>(i * lda + p)] = c.lower_a && p > i ? 0.0f : rng.normal() * std::exp2(rng.uniform(-6, 2));
  for (float& x : B) x = rng.normal() * std::exp2(rng.uniform(-6, 2));
  for (float& x : C) x = rng.normal();
  const std::vector<float> C0 = C;
  std::vector<float> scale(static_cast<size_t>(c.kk), 1.0f);
  if (c.row_scale)
    for (float& x : scale) x = std::exp2(rng.uniform(-4, 1));

  std::vector<uint16_t> Ap(static_cast<size_t>(c.m * ldp), 0xffff);  // poison: padding must not be read
  std::vector<uint32_t> Bp(static_cast<size_t>((c.kk + 1) / 2 * ldb), 0xffffffffu);
  cpu::pack_rows_bf16(A.data(), lda, c.m, c.kk, Ap.data(), ldp, c.a_scale);
  cpu::pack_pairs_bf16(B.data(), ldb, c.kk, c.n, Bp.data(), ldb, c.row_scale ? scale.data() : nullptr);
  std::vector<uint32_t> Cp(static_cast<size_t>((c.m + 1) / 2 * ldc), 0xdeadbeefu), Cp_want(Cp.size(), 0xdeadbeefu);
  cpu::gemm_bf16(c.m, c.n, c.kk, Ap.data(), ldp, Bp.data(), ldb, C.data(), ldc, c.c_scale, c.lower_a, c.lower_c,
                 c.c_pairs ? Cp.data() : nullptr, ldc);
  if (c.c_pairs) {  // the same words as packing the C just written
    cpu::pack_pairs_bf16(C.data(), ldc, c.m, c.n, Cp_want.data(), ldc);
    EXPECT_EQ(Cp, Cp_want);
  }
  // The reference sees the operands as scaled in f32 (what the packing rounds).
  for (float& x : A) x *= c.a_scale;
  for (int64_t p = 0; p < c.kk; ++p)
    for (int64_t j = 0; j < ldb; ++j) B[static_cast<size_t>(p * ldb + j)] *= scale[static_cast<size_t>(p)];

  std::vector<double> want(static_cast<size_t>(c.m * c.n)), mag(want.size());
  std::vector<float> absA(A.size()), absB(B.size());
  for (size_t i = 0; i < A.size(); ++i) absA[i] = std::fabs(A[i]);
  for (size_t i = 0; i < B.size(); ++i) absB[i] = std::fabs(B[i]);
  ref::gemm_bf16(c.m, c.n, c.kk, A.data(), lda, B.data(), ldb, want.data(), c.n);
  ref::gemm_bf16(c.m, c.n, c.kk, absA.data(), lda, absB.data(), ldb, mag.data(), c.n);
  // Products of bf16 values are exact in f32; what remains is at most one f32 rounding per
  // reduction step, one for c_scale C and one for the sum, each <= 2^-24 of the running magnitude
  // (plus flushed denormals, far below this scale).
  double worst = 0.0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      if (c.lower_c && j > i) continue;
      const size_t r = static_cast<size_t>(i * c.n + j), o = static_cast<size_t>(i * ldc + j);
      const double base = static_cast<double>(c.c_scale) * C0[o];
      const double bound = static_cast<double>(c.kk + 2) * std::ldexp(1.0, -24) * (mag[r] + std::fabs(base)) + 1e-30;
      worst = std::max(worst, std::fabs(static_cast<double>(C[o]) - (base + want[r])) / bound);
    }
  // Columns past n (inside ldc) are never written.
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = c.n; j < ldc; ++j) EXPECT_EQ(C[static_cast<size_t>(i * ldc + j)], C0[static_cast<size_t>(i * ldc + j)]);
  return worst;
}

TEST(GemmBf16, matches_bf16_rounding_reference) {
  if (!cpu::bf16_gemm_available()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  SCOPED_TRACE(test::seed_note());
  Rng rng(1);
  for (int64_t m : {1, 7, 8, 9, 31, 64, 128})
    for (int64_t n : {16, 32, 48, 128})
      for (int64_t kk : {1, 2, 3, 31, 33, 64, 127, 128})
        for (float c_scale : {0.0f, 1.0f, 0.37f}) {
          const Case c{m, n, kk, c_scale, false, false, c_scale == 0.37f, 1.0f, c_scale != 0.0f};
          SCOPED_TRACE(name(c));
          EXPECT_LE(check(c, rng), 1.0);
        }
}

TEST(GemmBf16, triangular_variants) {
  if (!cpu::bf16_gemm_available()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  SCOPED_TRACE(test::seed_note());
  Rng rng(2);
  // The chunk's shapes: P u (lower A, L x L by L x Dv) and K K^T (lower C, L x Dk by Dk x L).
  for (int64_t l : {1, 5, 17, 63, 64}) {
    const int64_t lp = (l + 15) / 16 * 16;
    for (const Case& c : {Case{l, 128, l, 1.0f, true, false}, Case{l, 48, l, 0.0f, true, false, true}, Case{l, lp, 128, 0.0f, false, true},
                          Case{l, lp, 33, 0.0f, false, true}, Case{l, 128, 8 * (l / 8), 1.0f, false, false, false, -1.0f}}) {
      SCOPED_TRACE(name(c));
      EXPECT_LE(check(c, rng), 1.0);
    }
  }
}

TEST(GemmBf16, transposed_operands_equal_packing_the_transpose) {
  if (!cpu::bf16_gemm_available()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  SCOPED_TRACE(test::seed_note());
  Rng rng(3);
  for (int64_t m : {1, 15, 16, 17, 64})
    for (int64_t kk : {1, 2, 7, 24, 33, 40, 128}) {
      SCOPED_TRACE("m " + std::to_string(m) + " kk " + std::to_string(kk));
      const int64_t n = (m + 15) / 16 * 16 + 16, lda = (kk + 1) / 2 * 2 + 2, pairs = (kk + 1) / 2;
      std::vector<float> K(static_cast<size_t>(m * kk)), Kt(static_cast<size_t>(kk * n), 0.0f);
      for (int64_t j = 0; j < m; ++j)
        for (int64_t p = 0; p < kk; ++p) Kt[static_cast<size_t>(p * n + j)] = K[static_cast<size_t>(j * kk + p)] = rng.normal();
      // B of Kᵀ from K's packed rows == Kᵀ packed directly.
      std::vector<uint16_t> Ka(static_cast<size_t>(m * lda));
      cpu::pack_rows_bf16(K.data(), kk, m, kk, Ka.data(), lda);
      std::vector<uint32_t> got(static_cast<size_t>(pairs * n), 0xdeadbeefu), want(got.size());
      cpu::pairs_of_transpose_bf16(Ka.data(), lda, m, kk, got.data(), n, n);
      cpu::pack_pairs_bf16(Kt.data(), n, kk, n, want.data(), n);
      EXPECT_EQ(got, want);
      // Its rows unpacked == Kᵀ's rows packed as an A operand.
      std::vector<uint16_t> rows(static_cast<size_t>(kk * n)), rows_want(rows.size());
      cpu::unpack_pairs_bf16(want.data(), n, kk, n, rows.data(), n);
      cpu::pack_rows_bf16(Kt.data(), n, kk, n, rows_want.data(), n);
      EXPECT_EQ(rows, rows_want);
    }
}

TEST(GemmBf16, old_c_from_elsewhere_row_scaled_and_streamed_gives_the_same_bits) {
  // C = A B + diag(s) C_in written to a separate (64-byte aligned, streamed or not) C must equal
  // pre-scaling C_in's rows into C in f32, then C = A B + 1 C: the chunked kernel's output path.
  if (!cpu::bf16_gemm_available()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  SCOPED_TRACE(test::seed_note());
  Rng rng(4);
  for (int64_t m : {1, 7, 8, 13, 64})
    for (int64_t n : {16, 48, 128})
      for (bool lower_a : {false, true})
        for (bool stream : {false, true}) {
          const int64_t kk = lower_a ? m : 37, lda = (kk + 1) / 2 * 2, ldc = n + 32, ldci = n + 16;
          SCOPED_TRACE("m " + std::to_string(m) + " n " + std::to_string(n) + (lower_a ? " lower_a" : "") + (stream ? " stream" : ""));
          std::vector<float> A(static_cast<size_t>(m * kk)), B(static_cast<size_t>(kk * n)), Cin(static_cast<size_t>(m * ldci)),
              s(static_cast<size_t>(m));
          for (int64_t i = 0; i < m; ++i)
            for (int64_t p = 0; p < kk; ++p) A[static_cast<size_t>(i * kk + p)] = lower_a && p > i ? 0.0f : rng.normal();
          for (float& x : B) x = rng.normal();
          for (float& x : Cin) x = rng.normal();
          for (float& x : s) x = std::exp2(rng.uniform(-6, 0));
          std::vector<uint16_t> Ap(static_cast<size_t>(m * lda));
          std::vector<uint32_t> Bp(static_cast<size_t>((kk + 1) / 2 * n));
          cpu::pack_rows_bf16(A.data(), kk, m, kk, Ap.data(), lda);
          cpu::pack_pairs_bf16(B.data(), n, kk, n, Bp.data(), n);
          std::vector<float> want(static_cast<size_t>(m * ldc), -7.0f);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              want[static_cast<size_t>(i * ldc + j)] = Cin[static_cast<size_t>(i * ldci + j)] * s[static_cast<size_t>(i)];
          cpu::gemm_bf16(m, n, kk, Ap.data(), lda, Bp.data(), n, want.data(), ldc, 1.0f, lower_a);
          float* got = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(m * ldc) * sizeof(float)));
          std::fill(got, got + m * ldc, -7.0f);
          cpu::GemmBf16Extra extra;
          extra.c_in = Cin.data();
          extra.ldc_in = ldci;
          extra.c_row_scale = s.data();
          extra.stream = stream;
          cpu::gemm_bf16(m, n, kk, Ap.data(), lda, Bp.data(), n, got, ldc, 0.0f, lower_a, false, nullptr, 0, &extra);
          EXPECT_EQ(std::vector<float>(got, got + m * ldc), want);
          std::free(got);
        }
}

TEST(GemmBf16, rounds_operands_to_nearest_even) {
  if (!cpu::bf16_gemm_available()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  // bf16 values near 1 are 2^-7 apart. 1 + 2^-8 + 2^-9 lies past the halfway point and rounds up;
  // 1 + 2^-8 and 1 + 2^-7 + 2^-8 lie exactly halfway and go to the even neighbour (1 and 1 + 2^-6).
  // Truncation would give 1, 1, 1 + 2^-7.
  const float a[4] = {1.0f + 0x1p-8f + 0x1p-9f, 1.0f + 0x1p-8f, 1.0f + 0x1p-7f + 0x1p-8f, 0.0f};
  std::vector<float> B(16 * 3, 0.0f);
  for (int64_t j = 0; j < 16; ++j) B[static_cast<size_t>(j % 3 * 16 + j)] = 1.0f;  // picks a[j % 3]
  uint16_t Ap[4];
  std::vector<uint32_t> Bp(2 * 16);
  cpu::pack_rows_bf16(a, 4, 1, 3, Ap, 4);
  cpu::pack_pairs_bf16(B.data(), 16, 3, 16, Bp.data(), 16);
  float C[16];
  cpu::gemm_bf16(1, 16, 3, Ap, 4, Bp.data(), 16, C, 16, 0.0f);
  const float want[3] = {1.0f + 0x1p-7f, 1.0f, 1.0f + 0x1p-6f};
  for (int64_t j = 0; j < 16; ++j) EXPECT_EQ(C[j], want[j % 3]) << j;
}

}  // namespace
}  // namespace sanctum::ops

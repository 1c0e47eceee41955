// The packed f32 GEMM (ops/cpu/gemm_f32.h) against its scalar twin (ops/ref/gemm_f32.h) on fresh
// random data: sizes that are not multiples of the vector width, the micro-tile or the cache blocks,
// B in f32, bf16 and f16, plain and transposed, every operand strided.
#include "ops/cpu/gemm_f32.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "hwy/targets.h"
#include "op_test_util.h"
#include "ops/ref/gemm_f32.h"

namespace sanctum::ops {
namespace {

using test::Rng;

struct Case {
  int64_t m, n, k;
  DType b_dtype;
  bool transposed;
};

std::string name(const Case& c) {
  return "m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " B " + dtype_name(c.b_dtype) +
         (c.transposed ? " transposed" : "");
}

// Runs one case and returns the largest error in units of its bound (must stay <= 1).
double check(const Case& c, Rng& rng) {
  constexpr float kUnwritten = -12345.0f;
  const int64_t lda = c.k + 3, ldc = c.n + 5;
  const int64_t b_rows = c.transposed ? c.n : c.k, b_cols = c.transposed ? c.k : c.n, ldb = b_cols + 7;
  std::vector<float> A(static_cast<size_t>(c.m * lda + 1)), C(static_cast<size_t>(c.m * ldc + 1), kUnwritten);
  for (float& x : A) x = rng.normal();
  const int64_t b_size = static_cast<int64_t>(dtype_size(c.b_dtype));
  std::vector<uint8_t> Bbytes(static_cast<size_t>((b_rows * ldb + 1) * b_size));
  for (int64_t i = 0; i < b_rows * ldb + 1; ++i) test::store_f(Bbytes.data(), c.b_dtype, i, rng.normal());
  // Operands start one element in: misaligned for the vector loads.
  const float* a = A.data() + 1;
  float* out = C.data() + 1;
  const cpu::GemmB B{Bbytes.data() + b_size, c.b_dtype, ldb, c.transposed};
  cpu::gemm_f32(c.m, c.n, c.k, a, lda, B, out, ldc);

  std::vector<double> want(static_cast<size_t>(c.m * c.n)), mag(want.size());
  ref::gemm_f32(c.m, c.n, c.k, a, lda, B, want.data(), c.n);
  std::vector<float> absA(A.size());
  std::transform(A.begin(), A.end(), absA.begin(), [](float x) { return std::fabs(x); });
  std::vector<float> absB(static_cast<size_t>(b_rows * ldb));
  for (int64_t i = 0; i < b_rows * ldb; ++i) absB[static_cast<size_t>(i)] = std::fabs(load_as_f32(B.data, c.b_dtype, i));
  ref::gemm_f32(c.m, c.n, c.k, absA.data() + 1, lda, cpu::GemmB{absB.data(), DType::f32, ldb, c.transposed}, mag.data(), c.n);
  // One f32 rounding per reduction step and one per block sum, each <= 2^-24 of the running
  // magnitude (B's conversion to f32 is exact).
  double worst = 0.0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      const size_t r = static_cast<size_t>(i * c.n + j);
      const double bound = static_cast<double>(c.k + 2) * std::ldexp(1.0, -24) * mag[r] + 1e-30;
      worst = std::max(worst, std::fabs(static_cast<double>(out[i * ldc + j]) - want[r]) / bound);
    }
  // Columns past n (inside ldc) and the element before C are never written.
  EXPECT_EQ(C[0], kUnwritten);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = c.n; j < ldc; ++j) EXPECT_EQ(out[i * ldc + j], kUnwritten);
  return worst;
}

TEST(GemmF32, matches_reference_at_sizes_around_tiles_and_blocks) {
  SCOPED_TRACE(test::seed_note());
  Rng rng(1);
  for (int64_t m : {1, 5, 8, 9, 31, 129, 257})
    for (int64_t n : {1, 7, 16, 33, 47, 49, 72, 97})
      for (int64_t k : {1, 3, 31, 72, 193, 400})
        for (bool transposed : {false, true}) {
          const Case c{m, n, k, DType::f32, transposed};
          SCOPED_TRACE(name(c));
          EXPECT_LE(check(c, rng), 1.0);
        }
}

TEST(GemmF32, converts_bf16_and_f16_b_while_packing) {
  SCOPED_TRACE(test::seed_note());
  Rng rng(2);
  for (DType dt : {DType::bf16, DType::f16})
    for (bool transposed : {false, true})
      for (const Case& s : {Case{17, 45, 130, dt, false}, Case{130, 100, 37, dt, false}, Case{3, 5, 200, dt, false}}) {
        const Case c{s.m, s.n, s.k, dt, transposed};
        SCOPED_TRACE(name(c));
        EXPECT_LE(check(c, rng), 1.0);
      }
}

TEST(GemmF32, wide_b_packs_into_many_panels) {
  SCOPED_TRACE(test::seed_note());
  Rng rng(3);
  // The last is past the packed-B buffer kept per thread (32 MiB), so it has one of its own.
  for (const Case& c :
       {Case{11, 4100, 21, DType::bf16, false}, Case{11, 4100, 21, DType::bf16, true}, Case{2, 4100, 2100, DType::bf16, true}}) {
    SCOPED_TRACE(name(c));
    EXPECT_LE(check(c, rng), 1.0);
  }
}

// Every SIMD target compiled in (AVX-512's 8 x 3-vector tile, AVX2's 6 x 2, the portable 4 x 2), not
// just the one this machine picks.
TEST(GemmF32, every_compiled_target_matches_reference) {
  SCOPED_TRACE(test::seed_note());
  Rng rng(5);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const Case& c : {Case{13, 41, 200, DType::bf16, true}, Case{130, 50, 30, DType::f32, false}}) {
      SCOPED_TRACE(std::string(hwy::TargetName(target)) + " " + name(c));
      EXPECT_LE(check(c, rng), 1.0);
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(GemmF32, b_of_another_dtype_raises_an_error) {
  const float a = 1.0f;
  const uint32_t b = 1;
  float c = 0.0f;
  EXPECT_THROW(cpu::gemm_f32(1, 1, 1, &a, 1, cpu::GemmB{&b, DType::u32, 1, false}, &c, 1), Error);
}

TEST(GemmF32, prepacked_b_on_one_thread_gives_the_same_bits) {
  SCOPED_TRACE(test::seed_note());
  Rng rng(6);
  for (const Case& c : {Case{1, 1, 1, DType::f32, true}, Case{77, 72, 300, DType::f32, false}, Case{200, 130, 72, DType::f32, true}}) {
    SCOPED_TRACE(name(c));
    const int64_t ldb = c.transposed ? c.k : c.n;
    std::vector<float> A(static_cast<size_t>(c.m * c.k)), Bv(static_cast<size_t>(c.k * c.n)), C1(static_cast<size_t>(c.m * c.n)),
        C2(C1.size(), -1.0f);
    for (float& x : A) x = rng.normal();
    for (float& x : Bv) x = rng.normal();
    const cpu::GemmB B{Bv.data(), DType::f32, ldb, c.transposed};
    cpu::gemm_f32(c.m, c.n, c.k, A.data(), c.k, B, C1.data(), c.n);
    const cpu::PackedGemmB packed = cpu::pack_gemm_b(c.k, c.n, B);
    cpu::gemm_f32_packed(c.m, A.data(), c.k, packed, C2.data(), c.n);
    EXPECT_EQ(C1, C2);
  }
}

TEST(GemmF32, empty_reduction_writes_zeros) {
  std::vector<float> C(3 * 4, 7.0f);
  const float a = 0.0f, b = 0.0f;
  cpu::gemm_f32(3, 4, 0, &a, 0, cpu::GemmB{&b, DType::f32, 4, false}, C.data(), 4);
  EXPECT_EQ(C, std::vector<float>(12, 0.0f));
}

TEST(GemmF32, result_does_not_depend_on_the_thread_count_split) {
  // Each C element's sum order follows the blocking only: two calls give the same bits, and a row
  // computed alone equals the same row inside a large product.
  SCOPED_TRACE(test::seed_note());
  Rng rng(4);
  const int64_t m = 300, n = 90, k = 250;
  std::vector<float> A(static_cast<size_t>(m * k)), Bv(static_cast<size_t>(k * n)), C1(static_cast<size_t>(m * n)), C2(C1.size());
  for (float& x : A) x = rng.normal();
  for (float& x : Bv) x = rng.normal();
  const cpu::GemmB B{Bv.data(), DType::f32, n, false};
  cpu::gemm_f32(m, n, k, A.data(), k, B, C1.data(), n);
  cpu::gemm_f32(m, n, k, A.data(), k, B, C2.data(), n);
  EXPECT_EQ(C1, C2);
  std::vector<float> row(static_cast<size_t>(n));
  cpu::gemm_f32(1, n, k, A.data() + 137 * k, k, B, row.data(), n);
  EXPECT_TRUE(test::same_bits(row.data(), C1.data() + 137 * n, n));
}

}  // namespace
}  // namespace sanctum::ops

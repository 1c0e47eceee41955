// ops::matmul (Highway kernels) against ops::ref::matmul, plus the row-independence property the
// engine relies on ("prefill of L tokens == prefill of k + decode").
#include "ops/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/error.h"
#include "hwy/targets.h"
#include "matmul_rows_check.h"
#include "op_test_util.h"
#include "ops/ref/matmul.h"

namespace sanctum {
namespace {

using test::Rng;

// Max over outputs of |y - ref| / sum_c |x_c| * (|w_rc| or |s q| + |b|): the error relative to the
// magnitude the f32 sums actually handle. f32 accumulation bounds it by ~k/lanes * 2^-24.
double normalised_error(const Tensor& x, const Weight& w, const Tensor& y, const Tensor& ref) {
  double worst = 0.0;
  for (int64_t i = 0; i < x.dim(0); ++i)
    for (int64_t r = 0; r < w.rows; ++r) {
      double mag = 1e-30;
      for (int64_t c = 0; c < w.cols; ++c) {
        double wm;
        if (w.quantized()) {
          const int64_t g = c / w.quant.group_size;
          const double s = test::at(w.scales, r, g), b = test::at(w.biases, r, g);
          const double q = (ops::ref::weight_at(w, r, c) - b) / (s == 0.0 ? 1.0 : s);
          wm = std::abs(s * q) + std::abs(b);
        } else {
          wm = std::abs(ops::ref::weight_at(w, r, c));
        }
        mag += std::abs(test::at(x, i, c)) * wm;
      }
      worst = std::max(worst, std::abs(static_cast<double>(test::at(y, i, r)) - test::at(ref, i, r)) / mag);
    }
  return worst;
}

constexpr double kTolerance = 2e-5;  // f32 accumulation, k <= 5125

void expect_matches_ref(const Tensor& x, const Weight& w, const std::string& what) {
  Tensor y = Tensor::zeros({x.dim(0), w.rows}, DType::f32);
  Tensor ref = Tensor::zeros({x.dim(0), w.rows}, DType::f32);
  ops::matmul(x, w, y);
  ops::ref::matmul(x, w, ref);
  EXPECT_LE(normalised_error(x, w, y, ref), kTolerance) << what << " " << test::seed_note();
}

TEST(Matmul, dense_matches_ref_for_every_dtype_and_size) {
  Rng rng(1);
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t k : {1, 31, 32, 33, 769, 5125})
      for (auto [n, m] : {std::pair<int64_t, int64_t>{1, 33}, {2, 1}, {5, 17}, {9, 7}}) {
        Weight w = dense_weight(test::random_tensor({m, k}, dt, rng), "w");
        Tensor x = test::random_tensor({n, k}, DType::f32, rng);
        expect_matches_ref(x, w,
                           std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
      }
}

TEST(Matmul, quantized_matches_ref_for_every_bits_group_and_scale_dtype) {
  Rng rng(2);
  for (int bits : {4, 8})
    for (int g : {32, 64, 128})
      for (DType sdt : {DType::f32, DType::bf16, DType::f16})
        for (int64_t k : {int64_t{g}, int64_t{3} * g, int64_t{896}, int64_t{5120}})
          for (auto [n, m] : {std::pair<int64_t, int64_t>{1, 33}, {1, 1}, {6, 7}, {7, 3}, {9, 5}}) {
            if (k == 5120 && n > 1) continue;  // keeps the double-precision reference quick
            Weight w = test::random_quantized(m, k, bits, g, sdt, rng);
            Tensor x = test::random_tensor({n, k}, DType::f32, rng);
            expect_matches_ref(x, w,
                               std::string("q").append(std::to_string(bits)) + " g" + std::to_string(g) + " " + dtype_name(sdt) +
                                   " n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
          }
}

TEST(Matmul, strided_and_misaligned_rows_match_ref) {
  Rng rng(3);
  for (bool quant : {false, true}) {
    const int64_t n = 7, k = 256, m = 19;
    Weight w = quant ? test::random_quantized(m, k, 4, 64, DType::bf16, rng) : dense_weight(test::random_tensor({m, k}, DType::bf16, rng));
    Tensor x = test::strided_matrix(n, k, DType::f32, rng, 5, 1);
    Tensor y_base = Tensor::zeros({n, m + 4}, DType::f32);
    Tensor y = y_base.slice(1, 3, 3 + m);
    Tensor ref = Tensor::zeros({n, m}, DType::f32);
    ops::matmul(x, w, y);
    ops::ref::matmul(x, w, ref);
    EXPECT_LE(normalised_error(x, w, y, ref), kTolerance) << (quant ? "quantized" : "dense") << " " << test::seed_note();
    for (int64_t i = 0; i < n; ++i) {  // the padding around y is untouched
      EXPECT_EQ(y_base.data<float>()[i * (m + 4)], 0.0f);
      EXPECT_EQ(y_base.data<float>()[i * (m + 4) + m + 3], 0.0f);
    }
  }
}

TEST(Matmul, rows_are_bit_identical_for_any_n) {
  Rng rng(4);
  test::expect_rows_independent_of_n(test::random_quantized(37, 896, 4, 64, DType::bf16, rng), 150, rng, "q4 g64 k=896");
  test::expect_rows_independent_of_n(test::random_quantized(21, 4864, 8, 32, DType::f16, rng), 50, rng, "q8 g32 k=4864");
  test::expect_rows_independent_of_n(test::random_quantized(9, 4864, 4, 128, DType::f32, rng), 13, rng, "q4 g128 k=4864");
  test::expect_rows_independent_of_n(dense_weight(test::random_tensor({23, 901}, DType::bf16, rng)), 70, rng, "dense bf16 k=901");
  test::expect_rows_independent_of_n(dense_weight(test::random_tensor({5, 64}, DType::f32, rng)), 9, rng, "dense f32 k=64");
}

TEST(Matmul, prepare_weight_does_not_change_results) {
  Rng rng(5);
  for (bool quant : {false, true}) {
    Weight w =
        quant ? test::random_quantized(41, 896, 4, 64, DType::bf16, rng) : dense_weight(test::random_tensor({41, 96}, DType::f16, rng));
    Tensor x = test::random_tensor({5, w.cols}, DType::f32, rng);
    Tensor before = Tensor::zeros({5, w.rows}, DType::f32), after = Tensor::zeros({5, w.rows}, DType::f32);
    ops::matmul(x, w, before);
    Weight prepared = w;
    ops::prepare_weight(prepared);
    ops::matmul(x, prepared, after);
    EXPECT_TRUE(test::same_bits(before.data<float>(), after.data<float>(), 5 * w.rows)) << test::seed_note();
  }
}

// Every SIMD target compiled into the binary (AVX-512, AVX2, SSE4, ...) meets the reference and
// keeps rows independent of n, not just the one this machine picks.
TEST(Matmul, every_compiled_target_matches_ref_and_keeps_rows_independent) {
  Rng rng(7);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = hwy::TargetName(target);
    for (int bits : {4, 8}) {
      Weight w = test::random_quantized(13, 384, bits, 32, DType::bf16, rng);
      expect_matches_ref(test::random_tensor({5, 384}, DType::f32, rng), w, name + " q" + std::to_string(bits));
      test::expect_rows_independent_of_n(w, 11, rng, name);
    }
    Weight d = dense_weight(test::random_tensor({13, 99}, DType::f16, rng));
    expect_matches_ref(test::random_tensor({5, 99}, DType::f32, rng), d, name + " dense");
    test::expect_rows_independent_of_n(d, 11, rng, name);
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(Matmul, bad_arguments_raise_errors) {
  Rng rng(6);
  Weight w = test::random_quantized(8, 64, 4, 32, DType::bf16, rng);
  Tensor x = Tensor::zeros({2, 64}, DType::f32), y = Tensor::zeros({2, 8}, DType::f32);
  Tensor x_bad_k = Tensor::zeros({2, 65}, DType::f32);
  Tensor x_bf16 = Tensor::zeros({2, 64}, DType::bf16);
  Tensor y_bad = Tensor::zeros({2, 9}, DType::f32);
  Tensor x_cuda = Tensor::view_of(x.raw(), {2, 64}, DType::f32, nullptr, Device::cuda);
  EXPECT_THROW(ops::matmul(x_bad_k, w, y), Error);
  EXPECT_THROW(ops::matmul(x_bf16, w, y), Error);
  EXPECT_THROW(ops::matmul(x, w, y_bad), Error);
  EXPECT_THROW(ops::matmul(x, w, x), Error);
  EXPECT_THROW(ops::matmul(Tensor{}, w, y), Error);
  try {
    ops::matmul(x_cuda, w, y);
    ADD_FAILURE() << "a cuda tensor must raise";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("[matmul]"), std::string::npos) << e.what();
  }
  Weight bad_bits = w;
  bad_bits.quant.bits = 3;
  EXPECT_THROW(ops::matmul(x, bad_bits, y), Error);
  Weight bad_scales = w;
  bad_scales.scales = Tensor::zeros({8, 3}, DType::bf16);
  EXPECT_THROW(ops::matmul(x, bad_scales, y), Error);
  EXPECT_THROW(ops::prepare_weight(bad_bits), Error);
}

// The fused gate/up SwiGLU is a GPU decode kernel: on the CPU it is never offered, and a call anyway
// is a clear error, not a wrong answer.
TEST(Matmul, fused_silu_mul_is_refused_where_no_kernel_takes_it) {
  Rng rng(7);
  const Weight gate_up = test::random_quantized(32, 64, 4, 32, DType::bf16, rng);
  const Tensor x = test::random_tensor({1, 64}, DType::f32, rng);
  Tensor act = Tensor::zeros({1, 16}, DType::f32);
  EXPECT_FALSE(ops::matmul_silu_mul_ok(gate_up, x));
  EXPECT_FALSE(ops::matmul_silu_mul_ok(gate_up, Tensor{}));
  try {
    ops::matmul_silu_mul(x, gate_up, act);
    ADD_FAILURE() << "the CPU has no fused kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use matmul and silu_mul"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sanctum

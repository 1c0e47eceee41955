// ops::encoder_matmul, the vision tower's projections: dense CPU weights through the packed GEMM
// against the scalar matmul, strided rows in and out; other weights are ops::matmul's bits.
#include "ops/encoder_matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/matmul.h"
#include "ops/ref/matmul.h"

namespace sanctum::ops {
namespace {

using test::Rng;

TEST(EncoderMatmul, dense_weights_match_the_reference_with_strided_rows) {
  SCOPED_TRACE(test::seed_note());
  Rng rng(1);
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (auto [n, m, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {5, 97, 75}, {130, 49, 200}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n) + " m " + std::to_string(m) + " k " + std::to_string(k));
      const Tensor x = test::strided_matrix(n, k, DType::f32, rng);
      const Weight w = dense_weight(test::random_tensor({m, k}, dt, rng), "w");
      Tensor y = test::strided_matrix(n, m, DType::f32, rng, 5, 2), want = Tensor::zeros({n, m}, DType::f32);
      encoder_matmul(x, w, y);
      ref::matmul(x, w, want);
      // f32 sums of k products: within k rounding steps of the sum of magnitudes.
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j) {
          double mag = 0.0;
          for (int64_t p = 0; p < k; ++p) mag += std::fabs(test::at(x, i, p) * ref::weight_at(w, j, p));
          EXPECT_NEAR(test::at(y, i, j), test::at(want, i, j), static_cast<double>(k + 2) * std::ldexp(mag, -24) + 1e-30);
        }
    }
}

TEST(EncoderMatmul, quantized_weights_take_matmul) {
  Rng rng(2);
  const Weight w = test::random_quantized(40, 128, 4, 64, DType::bf16, rng);
  const Tensor x = test::random_tensor({9, 128}, DType::f32, rng);
  Tensor y = Tensor::zeros({9, 40}, DType::f32), want = Tensor::zeros({9, 40}, DType::f32);
  encoder_matmul(x, w, y);
  matmul(x, w, want);
  for (int64_t i = 0; i < 9; ++i) EXPECT_TRUE(test::same_bits(y.data<float>() + i * 40, want.data<float>() + i * 40, 40));
}

TEST(EncoderMatmul, bad_shapes_raise_errors) {
  Rng rng(3);
  const Weight w = dense_weight(test::random_tensor({8, 16}, DType::bf16, rng), "w");
  Tensor x = Tensor::zeros({3, 15}, DType::f32), y = Tensor::zeros({3, 8}, DType::f32), y_bad = Tensor::zeros({3, 7}, DType::f32);
  EXPECT_THROW(encoder_matmul(x, w, y), Error);
  Tensor x_ok = Tensor::zeros({3, 16}, DType::f32);
  EXPECT_THROW(encoder_matmul(x_ok, w, y_bad), Error);
}

}  // namespace
}  // namespace sanctum::ops

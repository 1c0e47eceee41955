// Stacked weights: one mat-mul over rows stacked from several weights gives each part's own result.
#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/matmul.h"

namespace sanctum {
namespace {

using test::Rng;

Weight random_dense(int64_t rows, int64_t cols, Rng& rng) {
  Weight w = dense_weight(test::random_tensor({rows, cols}, DType::bf16, rng), "dense");
  return w;
}

// Stacks the parts, then checks y(stacked) column block i == y(part i), bit for bit (a row's result
// does not depend on which other rows share the weight), for 1 and 5 input rows.
void expect_stacked_matches(const std::vector<Weight>& parts, Rng& rng) {
  std::vector<const Weight*> list;
  for (const Weight& w : parts) list.push_back(&w);
  ASSERT_TRUE(ops::can_stack_rows(list));
  const Weight s = ops::stack_rows(list, "stacked");
  int64_t rows = 0;
  for (const Weight& w : parts) rows += w.rows;
  ASSERT_EQ(s.rows, rows);
  ASSERT_EQ(s.cols, parts[0].cols);
  for (int64_t n : {1, 5}) {
    Tensor x = test::random_tensor({n, s.cols}, DType::f32, rng);
    Tensor all = Tensor::zeros({n, rows}, DType::f32);
    ops::matmul(x, s, all);
    int64_t c0 = 0;
    for (const Weight& w : parts) {
      Tensor y = Tensor::zeros({n, w.rows}, DType::f32);
      ops::matmul(x, w, y);
      for (int64_t i = 0; i < n; ++i)
        EXPECT_TRUE(test::same_bits(y.data<float>() + i * w.rows, all.data<float>() + i * rows + c0, w.rows))
            << "part at column " << c0 << ", row " << i;
      c0 += w.rows;
    }
  }
}

TEST(StackRows, quantized_parts_of_odd_sizes) {
  Rng rng(11);
  for (auto [bits, group] : {std::pair{4, 64}, {8, 32}, {4, 128}}) {
    const int64_t cols = 256;
    expect_stacked_matches({test::random_quantized(37, cols, bits, group, DType::bf16, rng),
                            test::random_quantized(16, cols, bits, group, DType::bf16, rng),
                            test::random_quantized(3, cols, bits, group, DType::bf16, rng)},
                           rng);
  }
}

TEST(StackRows, dense_parts) {
  Rng rng(12);
  expect_stacked_matches({random_dense(9, 40, rng), random_dense(31, 40, rng)}, rng);
}

TEST(StackRows, refuses_parts_that_differ) {
  Rng rng(13);
  const Weight a = test::random_quantized(16, 128, 4, 64, DType::bf16, rng);
  const Weight other_cols = test::random_quantized(16, 256, 4, 64, DType::bf16, rng);
  const Weight other_bits = test::random_quantized(16, 128, 8, 64, DType::bf16, rng);
  const Weight other_group = test::random_quantized(16, 128, 4, 32, DType::bf16, rng);
  const Weight other_scales = test::random_quantized(16, 128, 4, 64, DType::f16, rng);
  const Weight dense = random_dense(16, 128, rng);
  for (const Weight* b : {&other_cols, &other_bits, &other_group, &other_scales, &dense}) {
    std::vector<const Weight*> list{&a, b};
    EXPECT_FALSE(ops::can_stack_rows(list));
    EXPECT_THROW(ops::stack_rows(list, "x"), Error);
  }
  EXPECT_FALSE(ops::can_stack_rows(std::vector<const Weight*>{}));
}

}  // namespace
}  // namespace sanctum

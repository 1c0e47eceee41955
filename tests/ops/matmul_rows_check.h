#pragma once
// A property both matmul suites (f32/bf16 and int8 activations) hold the kernels to: each row of a
// batched matmul is bit-identical to the same row computed alone (n = 1, the mat-vec kernel),
// whatever the batch size, panel split or register tile the row landed in, and a middle slice of the
// batch (the batch a chunked prefill would run) gives the same bits too.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "op_test_util.h"
#include "ops/matmul.h"

namespace sanctum::test {

inline void expect_rows_independent_of_n(const Weight& w, int64_t n, Rng& rng, const std::string& what) {
  Tensor x = random_tensor({n, w.cols}, DType::f32, rng);
  Tensor y = Tensor::zeros({n, w.rows}, DType::f32);
  ops::matmul(x, w, y);
  for (int64_t i = 0; i < n; ++i) {
    Tensor yi = Tensor::zeros({1, w.rows}, DType::f32);
    ops::matmul(x.slice(0, i, i + 1), w, yi);
    ASSERT_TRUE(same_bits(yi.data<float>(), y.data<float>() + i * w.rows, w.rows))
        << what << " row " << i << " of " << n << " differs from the n=1 result " << seed_note();
  }
  const int64_t b = n / 3, e = n - 1;
  Tensor ys = Tensor::zeros({e - b, w.rows}, DType::f32);
  ops::matmul(x.slice(0, b, e), w, ys);
  EXPECT_TRUE(same_bits(ys.data<float>(), y.data<float>() + b * w.rows, (e - b) * w.rows)) << what << " " << seed_note();
}

}  // namespace sanctum::test

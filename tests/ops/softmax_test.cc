#include "ops/softmax.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/ref/softmax.h"

namespace sanctum {
namespace {

using test::Rng;

TEST(Softmax, matches_ref_at_sizes_around_the_vector_width) {
  Rng rng(31);
  for (int64_t d : {1, 31, 32, 33, 769, 5125, 151936}) {
    const int64_t n = 3;
    Tensor x = test::strided_matrix(n, d, DType::f32, rng);
    for (int64_t i = 0; i < n; ++i)  // logit-like spread
      for (int64_t j = 0; j < d; ++j) x.data<float>()[i * x.stride(0) + j] *= 8.0f;
    Tensor ref = x.clone();
    ops::softmax(x);
    ops::ref::softmax(ref);
    // Absolute error on probabilities relative to the row max probability (exp is ~1 ulp in f32).
    for (int64_t i = 0; i < n; ++i) {
      double mx = 0, err = 0, sum = 0;
      for (int64_t j = 0; j < d; ++j) {
        const double want = ref.data<float>()[i * d + j], got = x.data<float>()[i * x.stride(0) + j];
        mx = std::max(mx, want);
        err = std::max(err, std::abs(got - want));
        sum += got;
      }
      EXPECT_LE(err / mx, 4e-6) << "d=" << d << " " << test::seed_note();
      EXPECT_NEAR(sum, 1.0, 1e-4) << "d=" << d;
    }
  }
}

TEST(Softmax, handles_minus_infinity_masks) {
  Tensor x = Tensor::zeros({1, 40}, DType::f32);
  for (int j = 0; j < 40; ++j) x.data<float>()[j] = j < 3 ? 0.0f : -INFINITY;
  ops::softmax(x);
  for (int j = 0; j < 40; ++j) EXPECT_NEAR(x.data<float>()[j], j < 3 ? 1.0f / 3 : 0.0f, 1e-7f);
}

TEST(Softmax, bad_arguments_raise_errors) {
  Tensor bf = Tensor::zeros({2, 8}, DType::bf16);
  EXPECT_THROW(ops::softmax(bf), Error);
  Tensor empty;
  EXPECT_THROW(ops::softmax(empty), Error);
  Tensor x = Tensor::zeros({2, 8}, DType::f32);
  Tensor cuda = Tensor::view_of(x.raw(), {2, 8}, DType::f32, nullptr, Device::cuda);
  EXPECT_THROW(ops::softmax(cuda), Error);
}

}  // namespace
}  // namespace sanctum

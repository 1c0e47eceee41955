#include "ops/elementwise.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/ref/elementwise.h"

namespace sanctum {
namespace {

using test::Rng;

TEST(Elementwise, add_is_exact_for_contiguous_strided_and_aliased) {
  Rng rng(51);
  for (int64_t d : {1, 31, 32, 33, 769, 5125}) {
    Tensor a = test::strided_matrix(3, d, DType::f32, rng), b = test::random_tensor({3, d}, DType::f32, rng);
    Tensor out = Tensor::zeros({3, d}, DType::f32), ref = Tensor::zeros({3, d}, DType::f32);
    ops::add(a, b, out);
    ops::ref::add(a, b, ref);
    EXPECT_TRUE(test::same_bits(out.data<float>(), ref.data<float>(), 3 * d)) << "d=" << d;
    Tensor c = test::random_tensor({3, d}, DType::f32, rng);
    ops::ref::add(c, b, ref);
    ops::add(c, b, c);  // out aliases a
    EXPECT_TRUE(test::same_bits(c.data<float>(), ref.data<float>(), 3 * d)) << "d=" << d;
  }
}

TEST(Elementwise, add_bias_matches_ref_for_every_dtype) {
  Rng rng(52);
  for (DType bdt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t d : {1, 33, 896}) {
      Tensor y = test::strided_matrix(4, d, DType::f32, rng);
      Tensor y_ref = y.clone();
      Tensor bias = test::random_tensor({d}, bdt, rng);
      ops::add_bias(y, bias);
      ops::ref::add_bias(y_ref, bias);
      for (int64_t i = 0; i < 4; ++i)
        EXPECT_TRUE(test::same_bits(y.data<float>() + i * y.stride(0), y_ref.data<float>() + i * d, d)) << dtype_name(bdt);
    }
}

TEST(Elementwise, copy_handles_strides_and_dtypes) {
  Rng rng(53);
  Tensor src = test::strided_matrix(5, 77, DType::bf16, rng);
  Tensor dst = Tensor::zeros({5, 77}, DType::bf16);
  ops::copy(src, dst);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 77; ++j) EXPECT_EQ(test::at(dst, i, j), test::at(src, i, j));
  // a transposed (column-strided) source
  Tensor m = test::random_tensor({4, 6}, DType::f32, rng);
  Tensor col = m.slice(1, 2, 3);  // (4, 1) with row stride 6
  Tensor out = Tensor::zeros({4, 1}, DType::f32);
  ops::copy(col, out);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(out.data<float>()[i], m.data<float>()[i * 6 + 2]);
}

TEST(Elementwise, bad_arguments_raise_errors) {
  Tensor a = Tensor::zeros({2, 8}, DType::f32), b = Tensor::zeros({2, 9}, DType::f32);
  EXPECT_THROW(ops::add(a, b, a), Error);
  Tensor bias = Tensor::zeros({9}, DType::f32);
  EXPECT_THROW(ops::add_bias(a, bias), Error);
  Tensor abf = Tensor::zeros({2, 8}, DType::bf16);
  EXPECT_THROW(ops::copy(a, abf), Error);
  Tensor cuda = Tensor::view_of(a.raw(), {2, 8}, DType::f32, nullptr, Device::cuda);
  EXPECT_THROW(ops::add(a, a, cuda), Error);
}

}  // namespace
}  // namespace sanctum

#include "ops/activation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/ref/activation.h"

namespace sanctum {
namespace {

using test::Rng;

TEST(SiluMul, matches_ref_at_sizes_around_the_vector_width) {
  Rng rng(41);
  for (int64_t d : {1, 31, 32, 33, 769, 5125, 9728}) {
    for (int64_t n : {1, 4}) {
      Tensor g = test::strided_matrix(n, d, DType::f32, rng);
      Tensor u = test::strided_matrix(n, d, DType::f32, rng);
      for (int64_t i = 0; i < n; ++i) g.data<float>()[i * g.stride(0)] = -95.0f;  // deep negative tail
      Tensor out = Tensor::zeros({n, d}, DType::f32), ref = Tensor::zeros({n, d}, DType::f32);
      ops::silu_mul(g, u, out);
      ops::ref::silu_mul(g, u, ref);
      for (int64_t i = 0; i < n * d; ++i) {
        const float want = ref.data<float>()[i];
        ASSERT_NEAR(out.data<float>()[i], want, 4e-6f * (std::abs(want) + 1e-3f)) << "d=" << d << " i=" << i << " " << test::seed_note();
      }
    }
  }
}

TEST(SiluMul, output_may_alias_gate) {
  Rng rng(42);
  Tensor g = test::random_tensor({2, 100}, DType::f32, rng), u = test::random_tensor({2, 100}, DType::f32, rng);
  Tensor ref = Tensor::zeros({2, 100}, DType::f32);
  ops::ref::silu_mul(g, u, ref);
  ops::silu_mul(g, u, g);
  for (int i = 0; i < 200; ++i) EXPECT_NEAR(g.data<float>()[i], ref.data<float>()[i], 4e-6f * (std::abs(ref.data<float>()[i]) + 1e-3f));
}

TEST(SiluMul, bad_arguments_raise_errors) {
  Tensor a = Tensor::zeros({2, 8}, DType::f32), b = Tensor::zeros({2, 9}, DType::f32), bf = Tensor::zeros({2, 8}, DType::bf16);
  EXPECT_THROW(ops::silu_mul(a, b, a), Error);
  EXPECT_THROW(ops::silu_mul(a, bf, a), Error);
  Tensor cuda = Tensor::view_of(a.raw(), {2, 8}, DType::f32, nullptr, Device::cuda);
  EXPECT_THROW(ops::silu_mul(a, a, cuda), Error);
}

}  // namespace
}  // namespace sanctum

// ops::lora_add against its scalar twin (ops/ref/lora.h) at sizes around the vector width, with
// strided rows of x and y (a batch's rows, a stacked projection's columns) and bf16 input.
#include "ops/lora.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/ref/lora.h"

namespace sanctum {
namespace {

using test::Rng;

void expect_matches_ref(int64_t n, int64_t in, int64_t out, int64_t rank, DType x_type, Rng& rng) {
  Tensor x = test::strided_matrix(n, in, x_type, rng);
  Tensor a = test::random_tensor({rank, in}, DType::f32, rng, 0.3f), b = test::random_tensor({out, rank}, DType::f32, rng);
  Tensor y = test::strided_matrix(n, out, DType::f32, rng);
  Tensor want = Tensor::zeros({n, out}, DType::f32);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < out; ++j) want.data<float>()[r * out + j] = y.data<float>()[r * y.stride(0) + j];
  ops::lora_add(x, a, b, 1.75f, y);
  ops::ref::lora_add(x, a, b, 1.75f, want);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < out; ++j) {
      const float w = want.data<float>()[r * out + j], got = y.data<float>()[r * y.stride(0) + j];
      ASSERT_NEAR(got, w, 2e-5f * (std::abs(w) + std::sqrt(static_cast<float>(in * rank))))
          << "n=" << n << " in=" << in << " out=" << out << " rank=" << rank << " row " << r << " col " << j << " " << test::seed_note();
    }
}

TEST(LoraAdd, matches_ref_at_odd_sizes) {
  Rng rng(test::test_seed());
  for (int64_t in : {1, 31, 32, 33, 769})
    for (int64_t out : {1, 33, 130})
      for (int64_t rank : {1, 8, 17}) expect_matches_ref(3, in, out, rank, DType::f32, rng);
}

TEST(LoraAdd, bf16_input_matches_ref) {
  Rng rng(test::test_seed() + 1);
  expect_matches_ref(5, 1024, 96, 16, DType::bf16, rng);
}

TEST(LoraAdd, mismatched_shapes_are_refused_naming_the_op) {
  Rng rng(3);
  Tensor x = test::random_tensor({2, 16}, DType::f32, rng), a = test::random_tensor({4, 15}, DType::f32, rng);
  Tensor b = test::random_tensor({8, 4}, DType::f32, rng), y = Tensor::zeros({2, 8}, DType::f32);
  try {
    ops::lora_add(x, a, b, 1.0f, y);
    FAIL() << "a (4, 15) against x (2, 16) was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[lora_add]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sanctum

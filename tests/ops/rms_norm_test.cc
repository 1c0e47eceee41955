#include "ops/rms_norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/ref/rms_norm.h"

namespace sanctum {
namespace {

using test::Rng;

// Error normalised by the row's largest reference magnitude; f32 sums of squares over d <= 5125.
constexpr double kTolerance = 2e-6;

double row_error(const Tensor& got, const Tensor& want) {
  double worst = 0.0;
  for (int64_t i = 0; i < got.dim(0); ++i) {
    double mag = 1e-30, err = 0.0;
    for (int64_t j = 0; j < got.dim(1); ++j) {
      mag = std::max(mag, static_cast<double>(std::abs(test::at(want, i, j))));
      err = std::max(err, static_cast<double>(std::abs(test::at(got, i, j) - test::at(want, i, j))));
    }
    worst = std::max(worst, err / mag);
  }
  return worst;
}

TEST(RmsNorm, matches_ref_for_every_weight_dtype_size_and_offset) {
  Rng rng(21);
  for (DType wdt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t d : {1, 31, 32, 33, 769, 5125})
      for (float offset : {0.0f, 1.0f}) {
        const int64_t n = 3;
        Tensor x = test::strided_matrix(n, d, DType::f32, rng);
        Tensor w = test::random_tensor({d}, wdt, rng, 0.5f);
        Tensor out = Tensor::zeros({n, d}, DType::f32), ref = Tensor::zeros({n, d}, DType::f32);
        ops::rms_norm(x, w, 1e-6f, out, offset);
        ops::ref::rms_norm(x, w, 1e-6f, ref, offset);
        EXPECT_LE(row_error(out, ref), kTolerance) << dtype_name(wdt) << " d=" << d << " offset " << offset << " " << test::seed_note();
      }
}

TEST(RmsNorm, works_in_place_and_on_3d_tensors) {
  Rng rng(22);
  Tensor x = test::random_tensor({2, 5, 64}, DType::f32, rng);
  Tensor w = test::random_tensor({64}, DType::bf16, rng);
  Tensor ref = Tensor::zeros({2, 5, 64}, DType::f32);
  ops::ref::rms_norm(x, w, 1e-5f, ref);
  ops::rms_norm(x, w, 1e-5f, x);
  EXPECT_LE(row_error(x.reshape({10, 64}), ref.reshape({10, 64})), kTolerance) << test::seed_note();
}

TEST(RmsNorm, bad_arguments_raise_errors) {
  Tensor x = Tensor::zeros({2, 1024}, DType::f32), out = Tensor::zeros({2, 1024}, DType::f32);
  Tensor w = Tensor::zeros({896}, DType::f32);
  try {
    ops::rms_norm(x, w, 1e-6f, out);
    ADD_FAILURE() << "mismatched weight must raise";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[rms_norm] weight has 896 elements, x rows have 1024");
  }
  Tensor w_ok = Tensor::zeros({1024}, DType::f32);
  Tensor out_bad = Tensor::zeros({2, 1023}, DType::f32);
  EXPECT_THROW(ops::rms_norm(x, w_ok, 1e-6f, out_bad), Error);
  Tensor w_int = Tensor::zeros({1024}, DType::i32);
  EXPECT_THROW(ops::rms_norm(x, w_int, 1e-6f, out), Error);
  Tensor x_cuda = Tensor::view_of(x.raw(), {2, 1024}, DType::f32, nullptr, Device::cuda);
  EXPECT_THROW(ops::rms_norm(x_cuda, w_ok, 1e-6f, out), Error);
}

}  // namespace
}  // namespace sanctum

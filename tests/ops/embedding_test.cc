#include "ops/embedding.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/matmul.h"
#include "ops/precision.h"
#include "ops/ref/embedding.h"

namespace sanctum {
namespace {

using test::Rng;

void expect_same_as_ref(const Weight& table, Rng& rng, const std::string& what) {
  std::vector<int32_t> ids(9);
  for (auto& id : ids) id = static_cast<int32_t>(rng.integer(0, table.rows - 1));
  ids[0] = 0;
  ids[1] = static_cast<int32_t>(table.rows - 1);
  Tensor out = Tensor::zeros({9, table.cols}, DType::f32), ref = Tensor::zeros({9, table.cols}, DType::f32);
  ops::embedding(table, ids, out);
  ops::ref::embedding(table, ids, ref);
  EXPECT_TRUE(test::same_bits(out.data<float>(), ref.data<float>(), 9 * table.cols)) << what << " " << test::seed_note();
}

TEST(Embedding, dense_rows_are_exact_for_every_dtype) {
  Rng rng(61);
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t dim : {1, 33, 896}) expect_same_as_ref(dense_weight(test::random_tensor({50, dim}, dt, rng)), rng, dtype_name(dt));
}

TEST(Embedding, quantized_rows_dequantize_exactly) {
  Rng rng(62);
  for (int bits : {4, 8})
    for (int g : {32, 64, 128})
      for (DType sdt : {DType::f32, DType::bf16, DType::f16})
        expect_same_as_ref(test::random_quantized(37, 2 * 128, bits, g, sdt, rng), rng, "quantized");
}

// A table tied to an lm_head is prepared for int8 matmuls at load (repacked where the CPU runs the
// VNNI kernels, with the checkpoint's pages released); the lookup then reads the repacked copy.
TEST(Embedding, a_table_prepared_for_int8_matmuls_dequantizes_exactly) {
  Rng rng(63);
  for (int bits : {4, 8})
    for (int g : {32, 64, 128})
      for (DType sdt : {DType::f32, DType::bf16, DType::f16})
        for (int64_t cols : {int64_t{128}, int64_t{896}}) {
          Weight table = test::random_quantized(37, cols, bits, g, sdt, rng);
          ops::set_matmul_precision(ops::MatmulPrecision::int8);
          ops::prepare_weight(table);
          ops::set_matmul_precision(ops::MatmulPrecision::f32);
          expect_same_as_ref(table, rng, "prepared for int8");
        }
}

TEST(Embedding, bad_ids_and_shapes_raise_errors) {
  Rng rng(63);
  Weight table = test::random_quantized(10, 64, 4, 32, DType::bf16, rng);
  Tensor out = Tensor::zeros({2, 64}, DType::f32);
  std::vector<int32_t> bad{1, 10}, neg{-1, 0}, good{1, 2};
  EXPECT_THROW(ops::embedding(table, bad, out), Error);
  EXPECT_THROW(ops::embedding(table, neg, out), Error);
  Tensor short_out = Tensor::zeros({1, 64}, DType::f32);
  EXPECT_THROW(ops::embedding(table, good, short_out), Error);
  Tensor cuda = Tensor::view_of(out.raw(), {2, 64}, DType::f32, nullptr, Device::cuda);
  EXPECT_THROW(ops::embedding(table, good, cuda), Error);
  ops::embedding(table, good, out);  // and a good call still works
}

}  // namespace
}  // namespace sanctum

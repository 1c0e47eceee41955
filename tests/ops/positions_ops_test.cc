// The op forms a recorded decode step uses (ops/positions.h, add_rms_norm) on the CPU: each must give
// the bits of the plain ops it stands for, and reject bad arguments with a clear error.
#include <gtest/gtest.h>

#include <vector>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/ops.h"

namespace sanctum {
namespace {

using test::Rng;

Tensor ids_tensor(const std::vector<int32_t>& values) {
  Tensor t = Tensor::zeros({static_cast<int64_t>(values.size())}, DType::i32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

TEST(PositionsOps, add_rms_norm_equals_add_then_rms_norm) {
  Rng rng(31);
  for (int64_t d : {1, 17, 64, 1029}) {
    Tensor h = test::random_tensor({3, d}, DType::f32, rng), delta = test::random_tensor({3, d}, DType::f32, rng);
    Tensor w = test::random_tensor({d}, DType::bf16, rng);
    Tensor h2 = h.clone(), out = Tensor::zeros({3, d}, DType::f32), out2 = Tensor::zeros({3, d}, DType::f32);
    ops::add_rms_norm(h, delta, w, 1e-6f, out, 1.0f);
    ops::add(h2, delta, h2);
    ops::rms_norm(h2, w, 1e-6f, out2, 1.0f);
    EXPECT_TRUE(test::same_bits(h.data<float>(), h2.data<float>(), 3 * d));
    EXPECT_TRUE(test::same_bits(out.data<float>(), out2.data<float>(), 3 * d));
  }
  Tensor h = Tensor::zeros({2, 8}, DType::f32), wrong = Tensor::zeros({2, 9}, DType::f32), w = Tensor::zeros({8}, DType::f32);
  EXPECT_THROW(ops::add_rms_norm(h, wrong, w, 1e-6f, h), Error);
}

TEST(PositionsOps, store_rows_writes_at_the_first_position_and_checks_bounds) {
  Rng rng(32);
  Tensor rows = test::random_tensor({3, 10}, DType::f32, rng);
  Tensor cache = Tensor::zeros({8, 10}, DType::f32);
  const std::vector<int32_t> at{4, 5, 6};
  ops::store_rows(rows, cache, {at, nullptr});
  EXPECT_TRUE(test::same_bits(cache.data<float>() + 40, rows.data<float>(), 30));
  EXPECT_EQ(cache.data<float>()[39], 0.0f);
  EXPECT_EQ(cache.data<float>()[70], 0.0f);
  // The device copy of the positions (here host memory) wins when given.
  Tensor device = ids_tensor({1, 2, 3});
  ops::store_rows(rows, cache, {at, &device});
  EXPECT_TRUE(test::same_bits(cache.data<float>() + 10, rows.data<float>(), 30));
  const std::vector<int32_t> past{6, 7, 8};
  EXPECT_THROW(ops::store_rows(rows, cache, {past, nullptr}), Error);
  Tensor short_ids = ids_tensor({1, 2});
  EXPECT_THROW(ops::store_rows(rows, cache, {at, &short_ids}), Error);
}

TEST(PositionsOps, rope_attention_and_embedding_with_positions_match_the_plain_forms) {
  Rng rng(33);
  ops::RopeConfig rc;
  rc.head_dim = 32;
  rc.theta = 1e4;
  const ops::RopeTable table(rc);
  const std::vector<int32_t> at{5, 6};
  Tensor device = ids_tensor(at);

  Tensor x = test::random_tensor({2, 3, 32}, DType::f32, rng), x2 = x.clone();
  ops::rope(x, ops::Positions{at, &device}, table);
  ops::rope(x2, std::span<const int32_t>(at), table);
  EXPECT_TRUE(test::same_bits(x.data<float>(), x2.data<float>(), 2 * 3 * 32));

  // Attention over a cache of 16 rows, 7 of them live (positions 5 and 6 are the last two).
  Tensor q = test::random_tensor({2, 4, 32}, DType::f32, rng);
  Tensor k = test::random_tensor({16, 2, 32}, DType::f32, rng), v = test::random_tensor({16, 2, 32}, DType::f32, rng);
  Tensor out = Tensor::zeros({2, 4, 32}, DType::f32), out2 = Tensor::zeros({2, 4, 32}, DType::f32);
  ops::attention(q, k, v, ops::Positions{at, &device}, 0.2f, out);
  ops::attention(q, k.slice(0, 0, 7), v.slice(0, 0, 7), 5, 0.2f, out2);
  EXPECT_TRUE(test::same_bits(out.data<float>(), out2.data<float>(), 2 * 4 * 32));
  ops::attention(q, k, v, ops::Positions{at, nullptr}, 0.2f, out);
  EXPECT_TRUE(test::same_bits(out.data<float>(), out2.data<float>(), 2 * 4 * 32));
  const std::vector<int32_t> too_far{15, 16};
  EXPECT_THROW(ops::attention(q, k, v, ops::Positions{too_far, nullptr}, 0.2f, out), Error);

  Weight table_w;
  table_w.data = test::random_tensor({11, 6}, DType::f32, rng);
  table_w.rows = 11;
  table_w.cols = 6;
  Tensor e = Tensor::zeros({2, 6}, DType::f32), e2 = Tensor::zeros({2, 6}, DType::f32);
  const std::vector<int32_t> ids{3, 10};
  ops::embedding(table_w, ids_tensor(ids), e);
  ops::embedding(table_w, std::span<const int32_t>(ids), e2);
  EXPECT_TRUE(test::same_bits(e.data<float>(), e2.data<float>(), 12));
  EXPECT_THROW(ops::embedding(table_w, ids_tensor({3, 11}), e), Error);
  EXPECT_THROW(ops::embedding(table_w, Tensor::zeros({2}, DType::f32), e), Error);
}

}  // namespace
}  // namespace sanctum

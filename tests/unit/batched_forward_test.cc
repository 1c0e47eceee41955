// Model::forward_batch: several sequences in one forward give, row for row, the bits forward() gives
// each of them alone (the ops keep a row's result independent of the rows beside it), with prompt
// pieces, decode rows and verification rows mixed, at odd lengths and positions, on the hybrid and
// MoE fixtures (tests/data/hf_fixtures), both matmul precisions of the CPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../batched_forward_check.h"
#include "model/model.h"
#include "ops/precision.h"

namespace sanctum {
namespace {

const std::string kFixtures = std::string(SANCTUM_TEST_DATA_DIR) + "/hf_fixtures/";

void expect_batch_equals_solo(const std::string& dir, ops::MatmulPrecision precision) {
  const ops::MatmulPrecision saved = ops::matmul_precision();
  ops::set_matmul_precision(precision);
  auto model = load_model(kFixtures + dir);
  const int64_t vocab = model->vocab_size();
  test::compare_batch_with_solo(*model, dir, 7, [&](const float* got, const float* want, int64_t rows, const std::string& what) {
    EXPECT_EQ(std::memcmp(got, want, static_cast<size_t>(rows * vocab) * sizeof(float)), 0) << what << " differs from its solo run";
  });
  ops::set_matmul_precision(saved);
}

TEST(BatchedForward, hybrid_rows_equal_solo_rows_f32) { expect_batch_equals_solo("qwen3_5_text", ops::MatmulPrecision::f32); }
TEST(BatchedForward, hybrid_rows_equal_solo_rows_int8) { expect_batch_equals_solo("qwen3_5_text", ops::MatmulPrecision::int8); }
TEST(BatchedForward, moe_rows_equal_solo_rows_f32) { expect_batch_equals_solo("qwen3_5_moe_text", ops::MatmulPrecision::f32); }
TEST(BatchedForward, moe_rows_equal_solo_rows_int8) { expect_batch_equals_solo("qwen3_5_moe_text", ops::MatmulPrecision::int8); }

TEST(BatchedForward, a_state_twice_in_one_batch_is_refused) {
  auto model = load_model(kFixtures + "qwen3_5_text");
  SequenceState s = model->new_state();
  const std::vector<int32_t> a = {1, 2}, b = {3};
  const std::vector<BatchEntry> entries = {{a, &s, LogitsFor::last}, {b, &s, LogitsFor::last}};
  EXPECT_THROW(model->forward_batch(entries), Error);
}

}  // namespace
}  // namespace sanctum

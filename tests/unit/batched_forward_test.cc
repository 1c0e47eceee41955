// Model::forward_batch: several sequences in one forward give, row for row, the bits forward() gives
// each of them alone (the ops keep a row's result independent of the rows beside it), with prompt
// pieces, decode rows and verification rows mixed, at odd lengths and positions, on the hybrid and
// MoE fixtures (tests/data/hf_fixtures), both matmul precisions of the CPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "model/model.h"
#include "ops/precision.h"

namespace sanctum {
namespace {

const std::string kFixtures = std::string(SANCTUM_TEST_DATA_DIR) + "/hf_fixtures/";

std::vector<int32_t> random_ids(std::mt19937& rng, int64_t vocab, size_t n) {
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> out(n);
  for (auto& t : out) t = id(rng);
  return out;
}

bool same_bits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0; }

void expect_batch_equals_solo(const std::string& dir, ops::MatmulPrecision precision) {
  const ops::MatmulPrecision saved = ops::matmul_precision();
  ops::set_matmul_precision(precision);
  auto model = load_model(kFixtures + dir);
  const int64_t vocab = model->vocab_size();
  std::mt19937 rng(7);
  // Each sequence: a history already in its state, then this step's tokens and the rows it wants.
  struct Case {
    size_t history;
    size_t step;
    LogitsFor which;
  };
  const std::vector<Case> cases = {{0, 37, LogitsFor::last},  {12, 1, LogitsFor::last}, {70, 5, LogitsFor::all},
                                   {64, 64, LogitsFor::none}, {3, 1, LogitsFor::all},   {129, 130, LogitsFor::last}};
  std::vector<SequenceState> batched, alone;
  std::vector<std::vector<int32_t>> steps;
  for (const Case& c : cases) {
    const auto history = random_ids(rng, vocab, c.history);
    batched.push_back(model->new_state());
    alone.push_back(model->new_state());
    if (!history.empty()) {
      model->forward(history, batched.back(), LogitsFor::none);
      model->forward(history, alone.back(), LogitsFor::none);
    }
    steps.push_back(random_ids(rng, vocab, c.step));
  }
  std::vector<BatchEntry> entries;
  for (size_t i = 0; i < cases.size(); ++i) entries.push_back({steps[i], &batched[i], cases[i].which});
  Tensor rows = model->forward_batch(entries);
  // forward_batch's rows are scratch: copy them before the solo forwards reuse it.
  std::vector<float> got(rows ? rows.data<float>() : nullptr, rows ? rows.data<float>() + rows.numel() : nullptr);
  int64_t at = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    Tensor want = model->forward(steps[i], alone[i], cases[i].which);
    const int64_t n = Model::row_count(entries[i]);
    EXPECT_EQ(batched[i].length(), alone[i].length()) << dir << " sequence " << i;
    if (n == 0) continue;
    ASSERT_EQ(want.dim(0), n);
    EXPECT_TRUE(same_bits(got.data() + at * vocab, want.data<float>(), n * vocab))
        << dir << " sequence " << i << " differs from its solo run";
    at += n;
  }
  // And the states the batch left continue as the solo ones do.
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> next = random_ids(rng, vocab, 1);
    Tensor a = model->forward(next, batched[i], LogitsFor::last);
    std::vector<float> first(a.data<float>(), a.data<float>() + vocab);
    Tensor b = model->forward(next, alone[i], LogitsFor::last);
    EXPECT_TRUE(same_bits(first.data(), b.data<float>(), vocab)) << dir << " sequence " << i << " state after the batch";
  }
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

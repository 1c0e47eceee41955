// ops::moe_group and ops::grouped_expert_matmul on the CPU: against their scalar references, and
// against the per-row ops::expert_matmul that the grouped form must reproduce row for row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/moe.h"
#include "ops/ref/matmul.h"
#include "ops/ref/moe.h"

namespace sanctum {
namespace {

using test::Rng;

// Random expert ids in [0, E) that never pick the experts for which skip(e) holds.
Tensor random_ids(int64_t m, int64_t E, Rng& rng, bool (*skip)(int64_t)) {
  Tensor ids = Tensor::zeros({m}, DType::i32);
  for (int64_t i = 0; i < m; ++i) {
    int64_t e;
    do e = rng.integer(0, E - 1);
    while (skip(e) && E > 1);
    ids.data<int32_t>()[i] = static_cast<int32_t>(e);
  }
  return ids;
}

bool skip_odd(int64_t e) { return e % 2 == 1; }
bool skip_none(int64_t) { return false; }

// Max |a - b| over the magnitude of one output: sqrt(k) * rms(x) * rms(w).
double normalised_diff(const Tensor& a, const Tensor& b, double scale) {
  double worst = 0.0;
  for (int64_t i = 0; i < a.dim(0); ++i)
    for (int64_t j = 0; j < a.dim(1); ++j) worst = std::max(worst, std::abs(static_cast<double>(test::at(a, i, j)) - test::at(b, i, j)));
  return worst / scale;
}

double output_scale(const Tensor& x, const ops::ExpertSet& set) {
  double xs = 0.0, ws = 0.0;
  for (int64_t i = 0; i < x.dim(0); ++i)
    for (int64_t c = 0; c < x.dim(1); ++c) xs += std::pow(test::at(x, i, c), 2);
  for (int64_t e = 0; e < set.size(); ++e)
    for (int64_t r = 0; r < set[e].rows; ++r)
      for (int64_t c = 0; c < set[e].cols; ++c) ws += std::pow(ops::ref::weight_at(set[e], r, c), 2);
  return std::sqrt(static_cast<double>(x.dim(1)) * xs / static_cast<double>(x.numel()) * ws /
                   static_cast<double>(set.size() * set[0].rows * set[0].cols));
}

TEST(MoeGroup, sorts_rows_by_expert_stably_with_empty_experts) {
  Rng rng(41);
  for (int64_t E : {1, 5, 64})
    for (int64_t m : {1, 31, 33, 777}) {
      Tensor ids = random_ids(m, E, rng, skip_odd);
      Tensor offsets = Tensor::zeros({E + 1}, DType::i32), sorted = Tensor::zeros({m}, DType::i32);
      ops::moe_group(ids, E, offsets, sorted);
      const int32_t* off = offsets.data<int32_t>();
      const int32_t* s = sorted.data<int32_t>();
      ASSERT_EQ(off[0], 0);
      ASSERT_EQ(off[E], m);
      for (int64_t e = 0; e < E; ++e) {
        int64_t count = 0;
        for (int64_t i = 0; i < m; ++i) count += ids.data<int32_t>()[i] == e;
        ASSERT_EQ(off[e + 1] - off[e], count) << "expert " << e;
        for (int32_t j = off[e]; j < off[e + 1]; ++j) {
          EXPECT_EQ(ids.data<int32_t>()[s[j]], e);
          if (j > off[e]) {
            EXPECT_LT(s[j - 1], s[j]) << "rows of one expert stay in order";
          }
        }
      }
    }
}

TEST(MoeGroup, rejects_out_of_range_ids) {
  Tensor ids = Tensor::zeros({3}, DType::i32);
  ids.data<int32_t>()[1] = 4;
  Tensor offsets = Tensor::zeros({5}, DType::i32), sorted = Tensor::zeros({3}, DType::i32);
  EXPECT_THROW(ops::moe_group(ids, 3, offsets, sorted), Error);  // offsets of the wrong length
  Tensor offsets4 = Tensor::zeros({4}, DType::i32);
  EXPECT_THROW(ops::moe_group(ids, 3, offsets4, sorted), Error);  // id 4 of 3 experts
}

// Tasks of up to kExpertTaskSlots slots per expert, written out by hand for a small case: expert 0's
// ten slots make a task of 8 and one of 2, empty experts make none, the words past a task's slots are
// left alone.
TEST(MoeExpertTasks, groups_slots_by_expert_eight_at_a_time) {
  const std::vector<int32_t> choices = {2, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0};  // 13 slots of 5 experts
  const int64_t m = static_cast<int64_t>(choices.size());
  Tensor ids = Tensor::zeros({m}, DType::i32);
  std::copy(choices.begin(), choices.end(), ids.data<int32_t>());
  Tensor tasks = Tensor::zeros({1 + m * ops::kExpertTaskWords}, DType::i32);
  std::fill(tasks.data<int32_t>(), tasks.data<int32_t>() + tasks.numel(), -7);
  ops::moe_expert_tasks(ids, 5, tasks);
  const int32_t* t = tasks.data<int32_t>();
  ASSERT_EQ(t[0], 4);
  const std::vector<std::vector<int32_t>> want = {{0, 8, 1, 2, 4, 5, 6, 7, 8, 9}, {0, 2, 10, 12}, {2, 2, 0, 11}, {3, 1, 3}};
  for (size_t j = 0; j < want.size(); ++j) {
    const int32_t* task = t + 1 + static_cast<int64_t>(j) * ops::kExpertTaskWords;
    EXPECT_EQ(std::vector<int32_t>(task, task + want[j].size()), want[j]) << "task " << j;
    if (want[j].size() < static_cast<size_t>(ops::kExpertTaskWords)) {
      EXPECT_EQ(task[want[j].size()], -7) << "task " << j;
    }
  }
}

TEST(MoeExpertTasks, rejects_out_of_range_ids_and_a_wrong_size) {
  Tensor ids = Tensor::zeros({3}, DType::i32);
  Tensor tasks = Tensor::zeros({1 + 3 * ops::kExpertTaskWords}, DType::i32), short_tasks = Tensor::zeros({3}, DType::i32);
  EXPECT_THROW(ops::moe_expert_tasks(ids, 3, short_tasks), Error);
  ids.data<int32_t>()[1] = 3;
  EXPECT_THROW(ops::moe_expert_tasks(ids, 3, tasks), Error);  // id 3 of 3 experts
  ids.data<int32_t>()[1] = -1;
  EXPECT_THROW(ops::moe_expert_tasks(ids, 3, tasks), Error);
  EXPECT_THROW(ops::moe_expert_tasks(ids, 0, tasks), Error);
}

// Both row mappings, every weight format, experts without rows: the grouped rows equal the per-row
// expert_matmul bit for bit (the CPU matmul's rows do not depend on n) and the double reference.
// The host grouping: per expert, its (token, rank) choices in token order, with their result rows.
TEST(MoeGroup, rows_by_expert_on_the_host) {
  const std::vector<int32_t> ids = {2, 0, 0, 3, 2, 0};  // 3 tokens, top-2
  const std::vector<ops::ExpertRows> by = ops::rows_by_expert(ids, 4, 2);
  ASSERT_EQ(by.size(), 4u);
  EXPECT_EQ(by[0].tokens, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(by[0].slots, (std::vector<int32_t>{1, 2, 5}));
  EXPECT_TRUE(by[1].tokens.empty() && by[1].slots.empty());
  EXPECT_EQ(by[2].tokens, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(by[2].slots, (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(by[3].tokens, (std::vector<int32_t>{1}));
  EXPECT_EQ(by[3].slots, (std::vector<int32_t>{3}));
  EXPECT_THROW(ops::rows_by_expert(std::vector<int32_t>{4}, 4, 1), Error);
}

TEST(GroupedExpertMatmul, gather_and_scatter_equal_per_row_expert_matmul) {
  Rng rng(42);
  struct Format {
    int bits, group;
  };
  for (Format f : {Format{4, 32}, Format{4, 64}, Format{4, 128}, Format{8, 32}, Format{8, 64}, Format{8, 128}, Format{0, 0}})
    for (bool (*skip)(int64_t) : {skip_odd, skip_none}) {
      const int64_t E = 6, N = 40, K = 256, n = 13, k = 3, m = n * k;
      std::vector<Weight> ws;
      for (int64_t e = 0; e < E; ++e)
        ws.push_back(f.bits ? test::random_quantized(N, K, f.bits, f.group, DType::bf16, rng)
                            : dense_weight(test::random_tensor({N, K}, DType::bf16, rng)));
      ops::ExpertSet set(ws);
      Tensor ids = random_ids(m, E, rng, skip);
      Tensor offsets = Tensor::zeros({E + 1}, DType::i32), sorted = Tensor::zeros({m}, DType::i32);
      ops::moe_group(ids, E, offsets, sorted);
      const int32_t* s = sorted.data<int32_t>();
      SCOPED_TRACE("bits " + std::to_string(f.bits) + " group " + std::to_string(f.group) + " " + test::seed_note());

      // gather: row j of y is token sorted[j] / k through its expert.
      Tensor x = test::random_tensor({n, K}, DType::f32, rng);
      Tensor y = Tensor::zeros({m, N}, DType::f32), ref = Tensor::zeros({m, N}, DType::f32), per_row = Tensor::zeros({m, N}, DType::f32);
      ops::grouped_expert_matmul(x, set, offsets, sorted, ops::GroupedRows::gather, y);
      ops::ref::grouped_expert_matmul(x, set, offsets.data<int32_t>(), s, m, ops::GroupedRows::gather, false, ref);
      ops::expert_matmul(x, set, ids, per_row);
      EXPECT_LE(normalised_diff(y, ref, output_scale(x, set)), 1e-5);
      for (int64_t j = 0; j < m; ++j)
        EXPECT_TRUE(test::same_bits(y.data<float>() + j * N, per_row.data<float>() + s[j] * N, N)) << "grouped row " << j;

      // scatter: row sorted[j] of y is x row j through expert ids[sorted[j]].
      Tensor xs = test::random_tensor({m, K}, DType::f32, rng);
      Tensor ys = Tensor::zeros({m, N}, DType::f32), refs = Tensor::zeros({m, N}, DType::f32);
      ops::grouped_expert_matmul(xs, set, offsets, sorted, ops::GroupedRows::scatter, ys);
      ops::ref::grouped_expert_matmul(xs, set, offsets.data<int32_t>(), s, m, ops::GroupedRows::scatter, false, refs);
      EXPECT_LE(normalised_diff(ys, refs, output_scale(xs, set)), 1e-5);
      for (int64_t j = 0; j < m; ++j) {
        Tensor one = Tensor::zeros({1, N}, DType::f32), id = Tensor::zeros({1}, DType::i32);
        id.data<int32_t>()[0] = ids.data<int32_t>()[s[j]];
        ops::expert_matmul(xs.slice(0, j, j + 1), set, id, one);
        EXPECT_TRUE(test::same_bits(ys.data<float>() + s[j] * N, one.data<float>(), N)) << "grouped row " << j;
      }
    }
}

// The bf16 form of the reference rounds x and each dequantized weight to bf16 before multiplying.
TEST(GroupedExpertMatmul, bf16_reference_rounds_both_operands) {
  Rng rng(43);
  const int64_t K = 64;
  std::vector<Weight> ws{test::random_quantized(2, K, 4, 32, DType::bf16, rng)};
  ops::ExpertSet set(ws);
  Tensor x = test::random_tensor({1, K}, DType::f32, rng), y = Tensor::zeros({1, 2}, DType::f32);
  const int32_t offsets[] = {0, 1}, sorted[] = {0};
  ops::ref::grouped_expert_matmul(x, set, offsets, sorted, 1, ops::GroupedRows::gather, true, y);
  for (int64_t r = 0; r < 2; ++r) {
    double want = 0.0;
    for (int64_t c = 0; c < K; ++c) {
      const int64_t g = c / 32;
      const uint32_t q = (ws[0].data.data<uint32_t>()[r * 8 + c / 8] >> (4 * (c % 8))) & 15u;
      const float s = test::at(ws[0].scales, r, g), b = test::at(ws[0].biases, r, g);
      const float w = bf16_to_f32(f32_to_bf16(std::fma(s, static_cast<float>(q), b)));
      want += static_cast<double>(bf16_to_f32(f32_to_bf16(x.data<float>()[c]))) * w;
    }
    EXPECT_EQ(y.data<float>()[r], static_cast<float>(want));
  }
}

}  // namespace
}  // namespace sanctum

// add_row_lora over a batch whose sequences chose different adapters, one adapter that does not
// target the projection, and none: each row gains exactly its own sequence's low-rank term (a
// scalar reference per row), other rows keep the base output bit for bit.
#include "model/blocks/row_lora.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace sanctum {
namespace {

Tensor random_matrix(int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor t = Tensor::zeros({rows, cols}, DType::f32);
  for (int64_t i = 0; i < rows * cols; ++i) t.data<float>()[i] = normal(rng);
  return t;
}

LoraTarget target(int64_t in, int64_t out, int64_t rank, float scale, std::mt19937& rng) {
  LoraTarget t;
  t.rank = rank;
  t.in = in;
  t.out = out;
  t.a = random_matrix(rank, in, rng);
  t.b = random_matrix(out, rank, rng);
  t.scale = scale;
  return t;
}

TEST(RowLora, each_sequence_gets_its_own_adapter_and_no_other) {
  std::mt19937 rng(5);
  const int64_t in = 37, out = 29;
  const std::string module = "model.layers.0.self_attn.q_proj";
  const LoraTarget t1 = target(in, out, 3, 2.0f, rng), t2 = target(in, out, 7, 0.5f, rng), t3 = target(in, out, 2, 1.0f, rng);
  auto lora1 = std::make_shared<ServedLora>(), lora2 = std::make_shared<ServedLora>(), other = std::make_shared<ServedLora>();
  lora1->by_module[module] = &t1;
  lora2->by_module[module] = &t2;
  other->by_module["model.layers.0.self_attn.k_proj"] = &t3;  // targets another projection only

  // Rows: [0, 3) adapter 1, [3, 4) base, [4, 9) adapter 2, [9, 11) the other adapter, [11, 12) adapter 1 again.
  std::vector<SequenceState> states(5);
  states[0].set_lora(lora1);
  states[2].set_lora(lora2);
  states[3].set_lora(other);
  states[4].set_lora(lora1);
  const std::vector<SequenceRows> sequences = {{0, 3, &states[0]},
                                               {3, 4, &states[1]},
                                               {4, 9, &states[2]},
                                               {9, 11, &states[3]},
                                               {11, 12, &states[4]}};
  const int64_t n = 12;
  BatchRows batch;
  batch.sequences = sequences;
  const Tensor x = random_matrix(n, in, rng), base = random_matrix(n, out, rng);
  Tensor y = Tensor::zeros({n, out}, DType::f32);
  y.copy_from(base);
  add_row_lora(batch, module, x, y);

  const LoraTarget* row_target[n] = {&t1, &t1, &t1, nullptr, &t2, &t2, &t2, &t2, &t2, nullptr, nullptr, &t1};
  for (int64_t r = 0; r < n; ++r) {
    const LoraTarget* t = row_target[r];
    for (int64_t j = 0; j < out; ++j) {
      const float got = y.data<float>()[r * out + j], b0 = base.data<float>()[r * out + j];
      if (t == nullptr) {
        EXPECT_EQ(got, b0) << "row " << r << " has no adapter on this projection but changed";
        continue;
      }
      double sum = 0;
      for (int64_t k = 0; k < t->rank; ++k) {
        double low = 0;
        for (int64_t i = 0; i < in; ++i) low += double(t->a.data<float>()[k * in + i]) * x.data<float>()[r * in + i];
        sum += double(t->b.data<float>()[j * t->rank + k]) * low;
      }
      EXPECT_NEAR(got, b0 + t->scale * sum, 1e-4 * (1.0 + std::abs(sum))) << "row " << r << " col " << j;
    }
  }
}

TEST(RowLora, a_batch_without_adapters_is_left_alone) {
  std::vector<SequenceState> states(2);
  const std::vector<SequenceRows> sequences = {{0, 1, &states[0]}, {1, 3, &states[1]}};
  BatchRows batch;
  batch.sequences = sequences;
  EXPECT_FALSE(batch_has_lora(batch));
  states[1].set_lora(std::make_shared<ServedLora>());
  EXPECT_TRUE(batch_has_lora(batch));
}

}  // namespace
}  // namespace sanctum

// Model::forward_batch on the GPU: several sequences in one forward (prompt pieces, decode rows and
// verification rows mixed) against each sequence's own forward(). A batch's projections run as GEMMs
// where a lone decode row runs mat-vecs, so the bits may differ: every row must pick the solo run's
// token wherever the solo top-2 margin is clear, within a logit tolerance, and the states the batch
// leaves must continue like the solo ones. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../batched_forward_check.h"
#include "base/tuning.h"
#include "gpu_test_util.h"
#include "model/model.h"

namespace sanctum {
namespace {

const std::string kFixtures = std::string(SANCTUM_TEST_DATA_DIR) + "/hf_fixtures/";

class CudaBatchedForward : public test::RequiresGpu {};

// Rows agree: same argmax where the reference's top-2 margin exceeds `margin`, and every logit within `tol`.
void expect_rows_close(const float* got, const float* want, int64_t rows, int64_t vocab, float tol, float margin, const std::string& what) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = got + r * vocab;
    const float* w = want + r * vocab;
    float diff = 0.0f;
    for (int64_t i = 0; i < vocab; ++i) diff = std::max(diff, std::fabs(g[i] - w[i]));
    EXPECT_LE(diff, tol) << what << " row " << r;
    std::vector<float> sorted(w, w + vocab);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] > margin) {
      EXPECT_EQ(std::max_element(g, g + vocab) - g, std::max_element(w, w + vocab) - w) << what << " row " << r;
    }
  }
}

void expect_batch_close_to_solo(const std::string& dir) {
  auto model = load_model(kFixtures + dir, Device::cuda);
  const int64_t vocab = model->vocab_size();
  test::compare_batch_with_solo(*model, dir, 11, [&](const float* got, const float* want, int64_t rows, const std::string& what) {
    expect_rows_close(got, want, rows, vocab, 0.25f, 0.1f, what);
  });
}

TEST_F(CudaBatchedForward, hybrid_rows_match_solo_rows) { expect_batch_close_to_solo("qwen3_5_text"); }
TEST_F(CudaBatchedForward, moe_rows_match_solo_rows) { expect_batch_close_to_solo("qwen3_5_moe_text"); }

// Decode steps of several sequences (one token each), recorded as a CUDA graph and replayed, against
// the same steps launched kernel by kernel (tuning batch_graphs=0): the same kernels, so the same
// bits, step after step, while the set of sequences changes (one leaves, one joins) and a cache grows
// past its first block (a new buffer: the step is recorded again), in both precisions.
void expect_recorded_steps_equal_launched(const std::string& dir) {
  for (const char* precision : {"bf16", "f32"}) {
    Tuning launched;
    launched.apply("batch_graphs=0");
    const test::PrecisionScope scope(std::string(precision) == "f32" ? ops::MatmulPrecision::f32 : ops::MatmulPrecision::bf16);
    auto recorded_model = load_model(dir, Device::cuda);
    auto launched_model = load_model(dir, Device::cuda, launched);
    const int64_t vocab = recorded_model->vocab_size();
    std::mt19937 rng(5);
    struct Pair {
      SequenceState recorded, launched;
      int32_t next = 0;
    };
    std::vector<Pair> seqs;
    auto start = [&](size_t prompt) {
      const auto ids = test::random_ids(rng, vocab, prompt);
      Pair p{recorded_model->new_state(), launched_model->new_state(), 0};
      const Tensor a = recorded_model->forward(ids, p.recorded, LogitsFor::last);
      launched_model->forward(ids, p.launched, LogitsFor::last);
      p.next = static_cast<int32_t>(std::max_element(a.data<float>(), a.data<float>() + vocab) - a.data<float>());
      seqs.push_back(std::move(p));
    };
    for (size_t prompt : {250, 40, 7}) start(prompt);  // the first passes 256 rows, its first block, at step 6
    for (int step = 0; step < 16; ++step) {
      if (step == 9) seqs.erase(seqs.begin() + 1);
      if (step == 12) start(19);
      std::vector<std::vector<int32_t>> tokens;
      std::vector<BatchEntry> rec, lau;
      for (Pair& p : seqs) tokens.push_back({p.next});
      for (size_t i = 0; i < seqs.size(); ++i) {
        rec.push_back({tokens[i], &seqs[i].recorded, LogitsFor::last});
        lau.push_back({tokens[i], &seqs[i].launched, LogitsFor::last});
      }
      const Tensor a = recorded_model->forward_batch(rec).clone(), b = launched_model->forward_batch(lau);
      ASSERT_EQ(a.numel(), b.numel());
      const std::string what = dir + " " + precision + " step " + std::to_string(step);
      EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << what << ": recorded and launched steps differ";
      for (size_t i = 0; i < seqs.size(); ++i) {
        const float* row = a.data<float>() + static_cast<int64_t>(i) * vocab;
        seqs[i].next = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
      }
    }
  }
}

TEST_F(CudaBatchedForward, recorded_decode_steps_give_the_launched_steps_bits) {
  for (const std::string& dir :
       {kFixtures + "qwen3_5_text", kFixtures + "qwen3_5_moe_text", std::string(SANCTUM_TEST_DATA_DIR) + "/peft_adapters/qwen2_dora/base"})
    expect_recorded_steps_equal_launched(dir);
}

}  // namespace
}  // namespace sanctum

// Model::forward_batch on the GPU: several sequences in one forward (prompt pieces, decode rows and
// verification rows mixed) against each sequence's own forward(). A batch's projections run as GEMMs
// where a lone decode row runs mat-vecs, so the bits may differ: every row must pick the solo run's
// token wherever the solo top-2 margin is clear, within a logit tolerance, and the states the batch
// leaves must continue like the solo ones. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "model/model.h"

namespace sanctum {
namespace {

const std::string kFixtures = std::string(SANCTUM_TEST_DATA_DIR) + "/hf_fixtures/";

class CudaBatchedForward : public test::RequiresGpu {};

std::vector<int32_t> random_ids(std::mt19937& rng, int64_t vocab, size_t n) {
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> out(n);
  for (auto& t : out) t = id(rng);
  return out;
}

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
  std::mt19937 rng(11);
  struct Case {
    size_t history, step;
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
  std::vector<float> got(rows.data<float>(), rows.data<float>() + rows.numel());
  int64_t at = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    Tensor want = model->forward(steps[i], alone[i], cases[i].which);
    const int64_t n = Model::row_count(entries[i]);
    EXPECT_EQ(batched[i].length(), alone[i].length());
    if (n == 0) continue;
    expect_rows_close(got.data() + at * vocab, want.data<float>(), n, vocab, 0.25f, 0.1f, dir + " sequence " + std::to_string(i));
    at += n;
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> next = random_ids(rng, vocab, 1);
    Tensor a = model->forward(next, batched[i], LogitsFor::last);
    std::vector<float> first(a.data<float>(), a.data<float>() + vocab);
    Tensor b = model->forward(next, alone[i], LogitsFor::last);
    expect_rows_close(first.data(), b.data<float>(), 1, vocab, 0.25f, 0.1f, dir + " state of sequence " + std::to_string(i));
  }
}

TEST_F(CudaBatchedForward, hybrid_rows_match_solo_rows) { expect_batch_close_to_solo("qwen3_5_text"); }
TEST_F(CudaBatchedForward, moe_rows_match_solo_rows) { expect_batch_close_to_solo("qwen3_5_moe_text"); }

}  // namespace
}  // namespace sanctum

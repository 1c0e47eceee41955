// Model::forward_batch on the GPU: several sequences in one forward (prompt pieces, decode rows and
// verification rows mixed) against each sequence's own forward(). A batch's projections run as GEMMs
// where a lone decode row runs mat-vecs, so the bits may differ: every row must pick the solo run's
// token wherever the solo top-2 margin is clear, within a logit tolerance, and the states the batch
// leaves must continue like the solo ones. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../batched_forward_check.h"
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

}  // namespace
}  // namespace sanctum

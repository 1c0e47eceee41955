// A long prompt on the CPU runs in pieces (to bound scratch memory); the pieces must not change a
// single bit: the last logits and the state after it equal those of one unsplit forward, also when
// the prompt starts at a position that is not a piece boundary.
#include <gtest/gtest.h>

#include <vector>

#include "model/model.h"

namespace sanctum {
namespace {

const std::string kModel = std::string(SANCTUM_TEST_DATA_DIR) + "/hf_fixtures/qwen3_5_text";

std::vector<int32_t> tokens(int64_t n, int64_t vocab, int64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + seed * 104729) % vocab);
  return t;
}

std::vector<float> last_row(const Tensor& logits, int64_t vocab) {
  const float* p = logits.data<float>() + (logits.dim(0) - 1) * logits.stride(0);
  return {p, p + vocab};
}

TEST(PromptPieces, long_prompts_in_pieces_give_the_bits_of_one_forward) {
  auto model = load_model(kModel);
  const int64_t vocab = model->vocab_size();
  for (int64_t offset : {0, 37}) {
    const auto head = tokens(offset, vocab, 1), prompt = tokens(300, vocab, 2);
    SequenceState pieces = model->new_state(), whole = model->new_state();
    if (offset > 0) {
      model->forward(head, pieces, LogitsFor::none);
      model->forward(head, whole, LogitsFor::none);
    }
    const auto a = last_row(model->forward(prompt, pieces, LogitsFor::last), vocab);  // split into pieces
    const auto b = last_row(model->forward(prompt, whole, LogitsFor::all), vocab);    // one forward
    EXPECT_EQ(a, b) << "offset " << offset;
    const std::vector<int32_t> next = {3};
    EXPECT_EQ(last_row(model->forward(next, pieces, LogitsFor::last), vocab), last_row(model->forward(next, whole, LogitsFor::last), vocab))
        << "the step after the prompt, offset " << offset;
  }
}

}  // namespace
}  // namespace sanctum

// Rolling back a rejected draft on a hybrid model must restore the GatedDeltaNet state too. These
// tests run the real qwen3_5 fixture (tests/data/hf_fixtures) and show that a KV-only rollback — the
// original system's latent bug — changes the next logits, while the SequenceState API cannot do it.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/error.h"
#include "engine/generator.h"
#include "model/model.h"

namespace sanctum {
namespace {

const std::string kModel = std::string(SANCTUM_TEST_DATA_DIR) + "/hf_fixtures/qwen3_5_text";

std::vector<float> last_logits(Model& m, SequenceState& s, std::vector<int32_t> tokens) {
  Tensor l = m.forward(tokens, s, LogitsFor::last);
  return {l.data<float>(), l.data<float>() + m.vocab_size()};
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(SpeculationRollback, restore_after_rejected_draft_matches_never_drafting) {
  auto model = load_model(kModel);
  const std::vector<int32_t> prompt = {5, 77, 301, 12, 9, 450, 33};
  SequenceState straight = model->new_state();
  last_logits(*model, straight, prompt);
  auto want = last_logits(*model, straight, {42});

  SequenceState spec = model->new_state();
  last_logits(*model, spec, prompt);
  auto before = spec.snapshot();
  model->forward(std::vector<int32_t>{42, 17, 250, 3}, spec, LogitsFor::all);  // draft 17, 250, 3 all rejected
  spec.restore(*before);
  EXPECT_EQ(last_logits(*model, spec, {42}), want);  // bit-identical
}

TEST(SpeculationRollback, kv_only_rollback_is_detected_and_refused) {
  auto model = load_model(kModel);
  const std::vector<int32_t> prompt = {5, 77, 301, 12, 9, 450, 33};
  SequenceState straight = model->new_state();
  last_logits(*model, straight, prompt);
  auto want = last_logits(*model, straight, {42});

  SequenceState spec = model->new_state();
  last_logits(*model, spec, prompt);
  SequenceState kv_only = *spec.snapshot();  // KV caches and length at the rollback point
  model->forward(std::vector<int32_t>{17, 250, 3}, spec, LogitsFor::all);
  // The bug: keep the KV rollback but carry the recurrent state that saw the rejected draft.
  for (int64_t i = 0; i < model->config().num_hidden_layers; ++i)
    if (model->config().layers[static_cast<size_t>(i)].mixer == MixerKind::gated_delta_net)
      kv_only.linear(static_cast<size_t>(i)) = spec.linear(static_cast<size_t>(i));
  EXPECT_GT(max_abs_diff(last_logits(*model, kv_only, {42}), want), 1e-3f);
  // And the state API will not truncate a hybrid sequence at all.
  EXPECT_THROW(spec.truncate(static_cast<int64_t>(prompt.size())), Error);
}

TEST(SpeculationRollback, generation_with_speculation_equals_without_on_hybrid) {
  auto model = load_model(kModel);
  std::vector<int32_t> prompt;
  for (int rep = 0; rep < 3; ++rep)
    for (int32_t t : {11, 12, 13, 14, 15, 16, 17, 18}) prompt.push_back(t);
  GenerationParams p;
  p.max_tokens = 48;
  p.ignore_eos = true;
  SequenceState a = model->new_state();
  auto plain = generate(*model, a, prompt, p).tokens;
  p.speculate = true;
  p.lookup.always = true;  // draft at every step: the point is the rollback, not the speed
  SequenceState b = model->new_state();
  auto r = generate(*model, b, prompt, p);
  EXPECT_EQ(r.tokens, plain);
  EXPECT_GT(r.drafted_tokens, 0);
  EXPECT_EQ(a.length(), b.length());
}

}  // namespace
}  // namespace sanctum

// The generator's device-pick path (Model::forward_pick, only ids back) against its host path
// (forward's logits through the Sampler): the same tokens for one seed, greedy and sampled, with
// and without prompt-lookup verification; penalties and logits hooks stay on the host. And the
// chained path (Model::queue_pick, one step queued ahead): the same tokens again, never a step past
// max_tokens, and the step queued behind a stop or a cancel dropped with its token kept in the state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/generator.h"
#include "model/model.h"

namespace sanctum {
namespace {

constexpr int64_t kVocab = 50;

ModelConfig fake_config() {
  ModelConfig c;
  c.vocab_size = kVocab;
  c.eos_token_ids = {kVocab - 1};
  return c;
}

// Logits a fixed function of each fed token, peaked on a successor so outputs repeat (prompt lookup
// finds drafts). forward_pick is the Model default (host reference ops): it stands in for a GPU.
class FakeModel : public Model {
 public:
  explicit FakeModel(bool device_picks, bool chains = false) : Model(fake_config()), device_picks_(device_picks), chains_(chains) {}
  SequenceState new_state() const override { return SequenceState(); }
  Tensor forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which) override {
    ++forwards;
    state.advance(static_cast<int64_t>(tokens.size()));
    if (which == LogitsFor::none) return Tensor{};
    const size_t first = which == LogitsFor::last ? tokens.size() - 1 : 0;
    Tensor logits = Tensor::zeros({static_cast<int64_t>(tokens.size() - first), kVocab}, DType::f32);
    for (size_t r = first; r < tokens.size(); ++r) {
      float* row = logits.data<float>() + static_cast<int64_t>(r - first) * kVocab;
      const uint32_t t = static_cast<uint32_t>(tokens[r]);
      for (int64_t v = 0; v < kVocab; ++v)
        row[v] = static_cast<float>((t * 2654435761u + static_cast<uint32_t>(v) * 40503u) % 1000u) / 400.0f;
      row[(t * 7 + 3) % (kVocab - 1)] += 3.0f;
      row[(t * 11 + 5) % (kVocab - 1)] += 2.5f;
    }
    return logits;
  }
  std::span<const int32_t> forward_pick(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which,
                                        const TokenPick& pick) override {
    ++picks;
    return Model::forward_pick(tokens, state, which, pick);
  }
  bool picks_on_device() const override { return device_picks_; }
  // The Model default queues by running each step at once; these count what a GPU would hold.
  void queue_pick(int32_t token, SequenceState& state, const TokenPick& pick) override {
    Model::queue_pick(token, state, pick);
    ++queued;
    most_outstanding = std::max(most_outstanding, ++outstanding);
  }
  int32_t next_pick() override {
    --outstanding;
    return Model::next_pick();
  }
  void drop_picks() override {
    dropped += outstanding;
    outstanding = 0;
    Model::drop_picks();
  }
  bool chains_picks() const override { return chains_; }
  size_t weight_bytes_per_token() const override { return 0; }
  int forwards = 0, picks = 0, queued = 0, outstanding = 0, most_outstanding = 0, dropped = 0;

 private:
  bool device_picks_, chains_;
};

const std::vector<int32_t> kPrompt = {1, 2, 3, 4, 5, 6, 1, 2, 3};

struct Outcome {
  std::vector<int32_t> tokens;
  int picks = 0;
  int64_t drafted = 0, accepted = 0;
  int64_t state_length = 0;
  int queued = 0, most_outstanding = 0, dropped = 0;
  FinishReason finish = FinishReason::length;
};

Outcome outcome(bool device_picks, GenerationParams params, bool chains = false, const TokenCallback& on_tokens = {}) {
  FakeModel model(device_picks, chains);
  SequenceState state = model.new_state();
  GenerationResult r = generate(model, state, kPrompt, params, on_tokens);
  return {r.tokens,      model.picks, r.drafted_tokens, r.accepted_tokens, state.length(), model.queued, model.most_outstanding,
          model.dropped, r.finish};
}

GenerationParams base_params(float temperature, bool speculate) {
  GenerationParams p;
  p.max_tokens = 120;
  p.ignore_eos = true;
  p.sampling.temperature = temperature;
  p.sampling.seed = 1234;
  p.speculate = speculate;
  p.lookup.always = true;
  return p;
}

TEST(GeneratorDevicePick, greedy_gives_the_host_tokens_with_and_without_verification) {
  for (bool speculate : {false, true}) {
    const GenerationParams p = base_params(0.0f, speculate);
    const Outcome host = outcome(false, p), device = outcome(true, p);
    EXPECT_EQ(device.tokens, host.tokens) << "speculate " << speculate;
    if (speculate) {
      EXPECT_GT(device.drafted, 0);
    }
    EXPECT_EQ(host.picks, 0);
    EXPECT_GT(device.picks, 0);
  }
}

TEST(GeneratorDevicePick, sampling_follows_the_same_seeded_stream_with_and_without_drafts) {
  // The reference: plain host steps. Drafts verified on the host or the device, plain device
  // steps and chained ones must give the same tokens for the seed.
  for (int config = 0; config < 5; ++config) {
    GenerationParams p = base_params(0.9f, false);
    if (config == 1) p.sampling.top_p = 0.8f;
    if (config == 2) p.sampling.min_p = 0.05f;
    if (config == 3) p.sampling.top_k = static_cast<int>(kVocab);  // no cut: still on the device
    if (config == 4) p.sampling.temperature = 0.3f;                // drafts accepted often
    const Outcome plain = outcome(false, p);
    for (bool speculate : {false, true}) {
      p.speculate = speculate;
      const Outcome host = outcome(false, p), device = outcome(true, p), chained = outcome(true, p, true);
      EXPECT_EQ(host.tokens, plain.tokens) << "speculate " << speculate << " config " << config;
      EXPECT_EQ(device.tokens, plain.tokens) << "speculate " << speculate << " config " << config;
      EXPECT_EQ(chained.tokens, plain.tokens) << "speculate " << speculate << " config " << config;
      EXPECT_GT(device.picks, 0);
      if (speculate) {
        EXPECT_GT(host.drafted, 0);
        EXPECT_GT(device.drafted, 0);
        if (config == 4) {
          EXPECT_GT(device.accepted, 0);
        }
      }
    }
  }
}

TEST(GeneratorDevicePick, top_k_sampling_stays_on_the_host_greedy_does_not_care) {
  GenerationParams p = base_params(0.9f, false);
  p.sampling.top_k = 5;
  p.sampling.min_p = 0.05f;
  Outcome device = outcome(true, p);
  EXPECT_EQ(device.picks, 0);
  EXPECT_EQ(device.tokens, outcome(false, p).tokens);
  p = base_params(0.0f, false);
  p.sampling.top_k = 5;
  device = outcome(true, p);
  EXPECT_GT(device.picks, 0);
  EXPECT_EQ(device.tokens, outcome(false, p).tokens);
}

TEST(GeneratorDevicePick, penalties_and_logits_hooks_stay_on_the_host) {
  GenerationParams p = base_params(0.0f, false);
  p.sampling.repetition_penalty = 1.3f;
  Outcome device = outcome(true, p);
  EXPECT_EQ(device.picks, 0);
  EXPECT_EQ(device.tokens, outcome(false, p).tokens);
  p = base_params(0.7f, false);
  int rows = 0;
  p.on_logits = [&rows](std::span<const float>) { ++rows; };
  device = outcome(true, p);
  EXPECT_EQ(device.picks, 0);
  EXPECT_EQ(rows, 120);
}

TEST(GeneratorChainedPicks, gives_the_host_tokens_one_step_ahead_and_never_past_max_tokens) {
  for (float temperature : {0.0f, 0.9f}) {
    GenerationParams p = base_params(temperature, false);
    p.sampling.top_p = temperature > 0.0f ? 0.8f : 1.0f;
    const Outcome host = outcome(false, p), chained = outcome(true, p, true);
    EXPECT_EQ(chained.tokens, host.tokens) << "temperature " << temperature;
    EXPECT_EQ(chained.queued, p.max_tokens - 1);  // the first token comes with the prompt's last forward
    EXPECT_EQ(chained.most_outstanding, 2);
    EXPECT_EQ(chained.dropped, 0);
    EXPECT_EQ(chained.state_length, host.state_length);  // the last token is not fed
    EXPECT_EQ(chained.state_length, static_cast<int64_t>(kPrompt.size()) + p.max_tokens - 1);
  }
  GenerationParams one = base_params(0.0f, false);
  one.max_tokens = 1;
  EXPECT_EQ(outcome(true, one, true).queued, 0);
}

TEST(GeneratorChainedPicks, a_stop_or_a_cancel_drops_the_step_queued_behind_it) {
  GenerationParams p = base_params(0.9f, false);  // sampled: greedy output here repeats one token
  const Outcome free_run = outcome(false, p);
  size_t first = 0;  // the last token to appear for the first time
  for (size_t i = 1; i < free_run.tokens.size(); ++i)
    if (std::find(free_run.tokens.begin(), free_run.tokens.begin() + static_cast<std::ptrdiff_t>(i), free_run.tokens[i]) ==
        free_run.tokens.begin() + static_cast<std::ptrdiff_t>(i))
      first = i;
  ASSERT_GE(first, 2u);
  const int32_t stop = free_run.tokens[first];
  p.stop_ids = {stop};
  const Outcome host = outcome(false, p), chained = outcome(true, p, true);
  ASSERT_EQ(host.finish, FinishReason::stop);
  EXPECT_EQ(chained.finish, FinishReason::stop);
  EXPECT_EQ(chained.tokens, host.tokens);
  EXPECT_EQ(chained.tokens.size(), first + 1);
  EXPECT_EQ(chained.dropped, 1);
  EXPECT_EQ(chained.state_length, host.state_length + 1);  // the stop token was fed to the dropped step

  p = base_params(0.9f, false);
  p.callback_every = 1;
  int calls = 0;
  const TokenCallback cancel_at_five = [&calls](std::span<const int32_t>) { return ++calls < 5; };
  const Outcome cancelled = outcome(true, p, true, cancel_at_five);
  EXPECT_EQ(cancelled.finish, FinishReason::cancelled);
  EXPECT_EQ(cancelled.tokens.size(), 5u);
  EXPECT_EQ(cancelled.tokens, std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + 5));
  EXPECT_EQ(cancelled.dropped, 1);
}

TEST(GeneratorChainedPicks, chains_only_the_plain_steps_the_draft_gate_grants) {
  // Drafting at every step: a step without a draft is a run of one, queued and read at once.
  GenerationParams p = base_params(0.0f, true);
  const Outcome always = outcome(true, p, true);
  EXPECT_EQ(always.tokens, outcome(false, p).tokens);
  EXPECT_EQ(always.most_outstanding, 1);
  // Drafting where it pays: the gate's runs of plain steps are chained, with the same tokens.
  p.lookup.always = false;
  p.max_tokens = 400;
  const Outcome gated = outcome(true, p, true);
  EXPECT_EQ(gated.tokens, outcome(false, p).tokens);
  EXPECT_EQ(gated.tokens.size(), 400u);
  // Host sampling (penalties) never queues.
  p = base_params(0.7f, false);
  p.sampling.repetition_penalty = 1.3f;
  EXPECT_EQ(outcome(true, p, true).queued, 0);
}

}  // namespace
}  // namespace sanctum

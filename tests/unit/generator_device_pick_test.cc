// The generator's device-pick path (Model::forward_pick, only ids back) against its host path
// (forward's logits through the Sampler): the same tokens for one seed, greedy and sampled, with
// and without prompt-lookup verification; penalties and logits hooks stay on the host.
#include <gtest/gtest.h>

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
  explicit FakeModel(bool device_picks) : Model(fake_config()), device_picks_(device_picks) {}
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
      for (int64_t v = 0; v < kVocab; ++v) row[v] = static_cast<float>((t * 2654435761u + static_cast<uint32_t>(v) * 40503u) % 1000u) / 400.0f;
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
  size_t weight_bytes_per_token() const override { return 0; }
  int forwards = 0, picks = 0;

 private:
  bool device_picks_;
};

struct Outcome {
  std::vector<int32_t> tokens;
  int picks = 0;
  int64_t drafted = 0;
};

Outcome outcome(bool device_picks, GenerationParams params) {
  FakeModel model(device_picks);
  SequenceState state = model.new_state();
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 1, 2, 3};
  GenerationResult r = generate(model, state, prompt, params);
  return {r.tokens, model.picks, r.drafted_tokens};
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

TEST(GeneratorDevicePick, sampling_follows_the_same_seeded_stream) {
  for (bool speculate : {false, true}) {
    for (int config = 0; config < 4; ++config) {
      GenerationParams p = base_params(0.9f, speculate);
      if (config == 1) p.sampling.top_p = 0.8f;
      if (config == 2) p.sampling.min_p = 0.05f;
      if (config == 3) p.sampling.top_k = static_cast<int>(kVocab);  // no cut: still on the device
      const Outcome host = outcome(false, p), device = outcome(true, p);
      EXPECT_EQ(device.tokens, host.tokens) << "speculate " << speculate << " config " << config;
      if (speculate) {
      EXPECT_GT(device.drafted, 0);
    }
      EXPECT_GT(device.picks, 0);
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

}  // namespace
}  // namespace sanctum

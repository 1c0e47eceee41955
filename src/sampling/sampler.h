#pragma once
// Token selection: logit processors (repetition / presence / frequency penalties over a bounded
// window of recent tokens), then greedy argmax (temperature 0) or seeded sampling with top-k,
// top-p and min-p filtering. The same seed and inputs always give the same token.
// NaN logits count as -inf; a row with no finite logit gives token 0 (its argmax) at any temperature.
// The GPU twin of greedy and filtered sampling (no penalties) is ops/sampling.h: it takes each
// draw's uniform from uniform(), so host and device runs of one seed follow the same stream.
#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

namespace sanctum {

struct SamplingParams {
  float temperature = 0.0f;         // 0: greedy
  float top_p = 1.0f;               // nucleus mass kept (1: off)
  int top_k = 0;                    // 0: off
  float min_p = 0.0f;               // drop tokens with p < min_p * p_max (0: off)
  float repetition_penalty = 1.0f;  // >1 discourages tokens in the recent window (CTRL-style)
  float presence_penalty = 0.0f;    // OpenAI: subtract once per distinct recent token
  float frequency_penalty = 0.0f;   // OpenAI: subtract per occurrence
  int penalty_window = 64;          // recent tokens the penalties look at
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
  bool has_penalties() const { return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f; }
};

// The last `window` tokens and their counts.
class RecentTokens {
 public:
  explicit RecentTokens(int window = 64) : window_(window) {}
  void push(int32_t token);
  const std::unordered_map<int32_t, int>& counts() const { return counts_; }
  void clear() {
    tokens_.clear();
    counts_.clear();
  }

 private:
  int window_;
  std::deque<int32_t> tokens_;
  std::unordered_map<int32_t, int> counts_;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  const SamplingParams& params() const { return params_; }

  // Picks the next token from logits (vocab) f32; `logits` may be modified in place.
  int32_t sample(std::span<float> logits, const RecentTokens& recent);

  // Probability distribution after penalties, temperature and filtering (for tests and logprobs).
  std::vector<float> probabilities(std::span<float> logits, const RecentTokens& recent) const;

  // The next uniform in [0, 1) of this sampler's seeded stream: what sample() draws with when it
  // does not sample greedily. A caller that samples elsewhere (on the GPU) takes it from here.
  double uniform();
  // The next n uniforms without taking them (a device verification samples every row at once, then
  // takes as many as it kept tokens: skip_uniforms).
  std::vector<double> uniforms_ahead(size_t n) const;
  void skip_uniforms(size_t n);

  // Inverse CDF over ids in ascending order at u in [0, 1): the first id whose running mass passes
  // u * total; ids with p <= 0 are never picked.
  static int32_t draw_at(const std::vector<float>& p, double u);

 private:
  void apply_penalties(std::span<float> logits, const RecentTokens& recent) const;
  int32_t draw(const std::vector<float>& p) { return draw_at(p, uniform()); }

  SamplingParams params_;
  std::mt19937_64 rng_;
};

// Index of the largest value; the lowest index wins ties and NaN never wins (a row of only -inf and
// NaN gives 0).
int32_t argmax(std::span<const float> values);

}  // namespace sanctum

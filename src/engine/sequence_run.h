#pragma once
// One sequence's generation as a series of steps, so that a scheduler can run many sequences in one
// forward. Each step the run says which tokens it feeds (plan: a piece of the prompt, or the last
// sampled token with the tokens a rejected draft left to replay before it and prompt-lookup drafts
// after it); the caller runs them, alone or batched with other runs' tokens, and hands back their
// logits rows (take), from which the run samples, verifies drafts, rolls back, emits tokens and
// decides whether it is done. generate() drives one run alone (step_alone, which also keeps a GPU's
// device-side picks and chained steps); the engine drives many at once.
//
// A constrained run (GenerationParams::constraint) owns its ConstraintState: every row is biased and
// masked under the state after the tokens emitted before it, then sampled, and the token taken by
// the state. Prompt-lookup drafts are trimmed at their first token the grammar refuses, so a
// verification row never goes to a draft that could not be kept; the output is the same with or
// without drafts. On a model that picks on the device, a grammar's masks go with the pick (worked
// out while the forward runs) and only logit_bias keeps a run on the host's rows.
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/generator.h"

namespace sanctum {

class SequenceRun {
 public:
  // `state` may already hold a prefix of the whole prompt (a prompt-cache hit); `prompt` is the rest,
  // to prefill, at least one token. Throws sanctum::Error on bad token ids or max_tokens.
  SequenceRun(const Model& model, SequenceState state, std::vector<int32_t> prompt, GenerationParams params, TokenCallback on_tokens = {});
  SequenceRun(SequenceRun&&) = default;

  bool done() const { return done_; }
  bool prefilling() const { return !done_ && fed_prompt_ < prompt_.size(); }
  const GenerationResult& result() const { return result_; }
  SequenceState& state() { return state_; }

  struct Step {
    std::span<const int32_t> tokens;  // empty: nothing to run this step
    LogitsFor which = LogitsFor::none;
  };
  // This step's tokens. While prefilling, the next piece of the prompt: at most `prompt_budget`
  // tokens, the prefill chunk and up to the next snapshot position (0: none this step). Otherwise
  // the decode step's tokens, whatever the budget. Valid until take().
  Step plan(int64_t prompt_budget);
  // The logits rows of the planned step (host f32, the rows its `which` asks for), and how long the
  // step took (prompt-lookup's cost estimates learn from it).
  void take(const Tensor& rows, double seconds);
  // The client went away: finish = cancelled, nothing more is emitted.
  void cancel();

  // plan + forward + take for this run alone, picking on the device where the model does and the
  // request allows (the ids cross to the host, not the rows), and queueing chained steps where the
  // model chains them (Model::chains_picks).
  void step_alone(Model& model);

  // At most this many chained steps per step_alone (the engine checks for arrivals in between).
  void limit_chained_steps(int steps) { chain_limit_ = steps; }

  // Keep a copy of the last prompt position's raw logits row (call before the prefill ends), so that
  // fork() can start other sequences on the same prompt without prefilling it again (n > 1).
  void keep_prompt_row() { keep_prompt_row_ = true; }
  bool prompt_row_ready() const { return !prompt_row_.empty(); }
  // A new run on the same prompt (this run's prefill done and its row kept): a copy of the state at
  // the prompt's end, which samples its first token from that row with `params`' sampler.
  SequenceRun fork(GenerationParams params, TokenCallback on_tokens) const;

 private:
  SequenceRun(const Model& model, GenerationParams params, TokenCallback on_tokens);
  bool emit(int32_t token, bool latest = true);
  bool flush();
  std::span<float> row_of(const Tensor& rows, int64_t r);
  void first_token(int32_t token);
  template <class Pick>
  size_t verify(const Pick& pick_row, double seconds);
  void after_verification(const std::vector<int32_t>& out, size_t accepted, double seconds);
  void prompt_piece_done();
  void end();
  bool picks_on_device(const Model& model) const;
  int32_t pick(std::span<float> row, const RecentTokens& recent);
  TokenPick pick_for(size_t rows_ahead);
  RowMasks row_masks(bool verification);
  void chained_run(Model& model, int steps);

  const Model* model_;
  GenerationParams params_;
  TokenCallback on_tokens_;
  std::vector<int32_t> stops_;
  Sampler sampler_;
  RecentTokens recent_;
  ConstraintState constraint_;
  SequenceState state_;
  GenerationResult result_;
  bool done_ = false;

  // Prefill.
  std::vector<int32_t> prompt_;
  size_t fed_prompt_ = 0, planned_prompt_ = 0;
  size_t chunk_ = 512;
  int64_t start_length_ = 0;
  bool keep_prompt_row_ = false;
  int chain_limit_ = 1 << 30;
  std::vector<float> prompt_row_;

  // Decode.
  int32_t token_ = -1;                                   // sampled, not yet fed
  std::vector<int32_t> pending_;                         // tokens not yet handed to the callback
  std::vector<int32_t> context_;                         // prompt + generated: what prompt lookup searches
  std::unique_ptr<spec::SpeculationStats> local_stats_;  // when params_ brings none (kept put: gate_ refers to it)
  spec::DraftGate gate_;
  // Hybrid models: tokens of a partly rejected verification that the rewound state has not taken back
  // yet; they ride in front of the next forward (a recurrent state cannot be truncated, and a few more
  // rows cost less than another weight pass).
  std::vector<int32_t> replay_;
  std::vector<int32_t> fed_;          // the planned decode step: replay, token, draft
  std::vector<int32_t> draft_;        // its drafts
  size_t first_ = 0;                  // the row of token_ in fed_
  int64_t base_length_ = 0;           // the state's length before the step
  SequenceState::Checkpoint before_;  // its buffers are reused by every verification
  std::chrono::steady_clock::time_point t0_, t_decode_;
  bool started_ = false;
  // Device picks' uniforms and grammar masks (pick_for): the TokenPick points at them.
  double uniform_ = 0.0;
  std::vector<double> ahead_;
  std::vector<uint32_t> mask_words_;
};

}  // namespace sanctum

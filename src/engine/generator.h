#pragma once
// The generation loop for one sequence: prefill the prompt (in chunks), then decode token by token,
// sampling each, until EOS, a stop id, max_tokens, a grammar that is complete, or the callback asks
// to stop.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/output_constraint.h"
#include "engine/spec/prompt_lookup.h"
#include "model/model.h"
#include "sampling/sampler.h"

namespace sanctum {

enum class FinishReason { stop, length, cancelled };
const char* finish_reason_name(FinishReason reason);

struct GenerationParams {
  int max_tokens = 256;
  SamplingParams sampling;
  bool ignore_eos = false;
  std::vector<int32_t> stop_ids;  // in addition to the model's eos ids (unless ignore_eos)
  int prefill_chunk = 0;          // prompt tokens per forward; 0: the model's prefill_chunk()
  int callback_every = 1;         // tokens per on_tokens call (the final partial batch is flushed)
  // Prompt-lookup speculation: drafts from the context, verified in one forward; exact (the same
  // tokens at temperature 0, the same distribution otherwise). Off when speculate is false.
  bool speculate = false;
  spec::PromptLookupParams lookup;
  // Cost of speculation on this model, shared by the requests a caller runs on it (one per worker);
  // null: a fresh estimate for this request alone.
  spec::SpeculationStats* speculation_stats = nullptr;
  // Optional: absolute positions at which on_snapshot sees the state during prompt prefill (the
  // prompt-cache keeps them).
  std::vector<int64_t> snapshot_at;
  std::function<void(const SequenceState& state)> on_snapshot;
  // Optional: a grammar the output must follow and/or logit_bias (engine/output_constraint.h). A
  // grammar's mask goes with a device pick (TokenPick::masks); logit_bias picks on the host.
  std::shared_ptr<const OutputConstraint> constraint;
  // Optional: sees each row of raw logits (vocab) before penalties and sampling, e.g. for logprobs.
  std::function<void(std::span<const float> logits)> on_logits;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated tokens, the stop token included when it is EOS/stop id
  FinishReason finish = FinishReason::length;
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0.0;  // until the first token is sampled
  double decode_seconds = 0.0;
  int64_t drafted_tokens = 0;   // speculation: tokens proposed
  int64_t accepted_tokens = 0;  // speculation: proposals that were kept
};

// Called with each batch of new tokens; return false to stop (finish = cancelled).
using TokenCallback = std::function<bool(std::span<const int32_t> tokens)>;

// Runs `prompt` on top of `state` (which may already hold a prefix) and generates. On return the
// state holds the prompt and the generated tokens fed so far: not the last one sampled, and on a
// hybrid model possibly fewer (tokens kept after a rejected draft are fed with the next forward);
// or, where decode steps are chained (Model::chains_picks), possibly the last one too, when a stop
// token or a cancel ended generation after the next step was queued.
GenerationResult generate(Model& model, SequenceState& state, std::span<const int32_t> prompt, const GenerationParams& params,
                          const TokenCallback& on_tokens = {});

}  // namespace sanctum

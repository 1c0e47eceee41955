#pragma once
// What a request constrains its output with: a compiled grammar (response_format, constrained tool
// calls, a grammar text) and logit_bias. The request side builds one, immutable, shared by every
// choice; each sequence follows it with its own ConstraintState, which biases and masks each logits
// row before sampling and takes each emitted token.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"

namespace sanctum {

struct OutputConstraint {
  std::optional<grammar::CompiledGrammar> grammar;  // none: free text (logit_bias only)
  // Where the grammar starts. A reasoning model thinks freely first: the output starts inside a
  // reasoning block (in_reasoning: the prompt opened it) or may open one with its first token
  // (open_reasoning); the grammar starts after close_reasoning. Then, with a trigger (strict tools
  // under tool_choice "auto": the call's start tag), text stays free until the model writes it.
  int32_t open_reasoning = -1, close_reasoning = -1;
  bool in_reasoning = false;
  int32_t trigger = -1;
  // OpenAI logit_bias: added to the raw logits before penalties and temperature.
  std::vector<std::pair<int32_t, float>> logit_bias;
};

// One sequence's progress through an OutputConstraint. Copyable (n > 1 choices start from a copy at
// the prompt's end); not thread-safe.
class ConstraintState {
 public:
  ConstraintState() = default;
  explicit ConstraintState(std::shared_ptr<const OutputConstraint> constraint);

  bool active() const { return constraint_ != nullptr; }
  // The constraint adds logit_bias to the rows (which only the host's apply does).
  bool biases() const { return constraint_ && !constraint_->logit_bias.empty(); }
  // Adds logit_bias to `row` (vocab logits) and sets every token the grammar forbids now to -inf.
  void apply(std::span<float> row);
  // The grammar's mask now as `words` (the rows of a device's pick: ops/sampling.h `allowed`; bit
  // t % 32 of word t / 32 set: token t allowed, ids past the grammar's vocabulary clear, words past
  // its mask zero). False, `words` untouched, when nothing is masked now (free text: reasoning,
  // before the trigger, no grammar). What apply() masks a row with, without the logit_bias.
  bool fill_mask(std::span<uint32_t> words);
  // fill_mask for each row of a verification: row j (of draft.size() + 1, `row_words` each) under the
  // state after draft[0 .. j), draft being tokens allowed_prefix kept; a row with nothing masked
  // allows every id, and so do the rows after the grammar completes (no verification reads them).
  // False when no row is masked. The state is left as it was.
  bool fill_masks(std::span<const int32_t> draft, std::span<uint32_t> words, size_t row_words);
  // Takes an emitted token; throws sanctum::Error (internal) where the grammar refuses it, which a
  // token sampled from an applied row never is unless no token could continue.
  void accept(int32_t token);
  // The grammar has nothing more to add: the output ends here.
  bool complete() const;
  // How many leading tokens of `draft` (after the tokens accepted so far) the constraint allows;
  // the state is left as it was.
  size_t allowed_prefix(std::span<const int32_t> draft);

 private:
  enum class Phase { first, reasoning, before_trigger, grammar };
  Phase after_reasoning() const;
  bool masked_now() const;
  bool current_mask();         // fills mask_ when masked_now()
  bool allows(int32_t token);  // advances like accept, or returns false and changes nothing

  std::shared_ptr<const OutputConstraint> constraint_;
  Phase phase_ = Phase::before_trigger;  // unconstrained: nothing to wait for
  std::optional<grammar::GrammarMatcher> matcher_;
  std::vector<uint32_t> mask_;  // (mask_words) bit i: token i allowed
};

}  // namespace sanctum

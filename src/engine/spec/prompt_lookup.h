#pragma once
// Prompt-lookup drafting: the last n tokens of the context (n = ngram, cascading down to 1) are
// looked up earlier in the context; the tokens that followed the most recent earlier match are the
// draft. No second model: copy-heavy outputs (quotes, code edits, extraction) repeat their input.
#include <cstdint>
#include <span>
#include <vector>

namespace sanctum::spec {

struct PromptLookupParams {
  int max_draft = 5;  // tokens proposed per step
  int ngram = 3;      // longest suffix looked up; shorter ones are tried when it has no match
};

// Draft continuation of `context` (prompt + generated so far); empty when nothing matches.
std::vector<int32_t> propose(std::span<const int32_t> context, const PromptLookupParams& params, int max_tokens);

// Turns drafting off after repeated misses and back on later, so text that does not repeat its
// context pays (almost) nothing for speculation.
class DraftBackoff {
 public:
  bool allowed() const { return pause_ == 0; }
  void on_step_without_draft() { if (pause_ > 0) --pause_; }
  void on_verified(int drafted, int accepted);

 private:
  int misses_ = 0;     // consecutive verifications with nothing accepted
  int pause_ = 0;      // decode steps left before drafting again
  int next_pause_ = 8; // doubles on each pause, resets on an accepted draft
};

}  // namespace sanctum::spec

namespace sanctum::spec {
// Applies the compatibility environment overrides SANCTUM_PLD_MAX_LOOKUP (max draft tokens) and
// SANCTUM_PLD_NGRAM_SIZE (longest n-gram) on top of `params`; malformed values throw Error.
PromptLookupParams with_environment_overrides(PromptLookupParams params);
}  // namespace sanctum::spec

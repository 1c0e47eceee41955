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
  bool always = false;  // draft at every step, even where the measured cost says it does not pay
};

// Draft continuation of `context` (prompt + generated so far); empty when nothing matches.
std::vector<int32_t> propose(std::span<const int32_t> context, const PromptLookupParams& params, int max_tokens);

// What speculation costs on one model and machine, learned across requests (one per inference
// worker; not thread-safe). On a compute-bound model a multi-token forward costs nearly as much per
// token as single steps; on a memory-bound one it is almost free — so whether drafting pays is
// measured, not assumed.
struct SpeculationStats {
  double step_seconds = 0.0;  // moving average of a plain one-token step (0: not measured yet)
  double verify_ratio = 0.0;  // moving average of verification time / step time (0: not measured yet)
  double acceptance = 2.0;    // moving average of drafts accepted per verification (the prior for a request)
  int until_probe = 0;        // plain steps before the next probe while drafting does not pay
  int probe_interval = 16;    // doubles up to 256 while probes keep failing
};

// Per request: drafts when the expected tokens per verification, (acceptance + 1), beat its cost in
// plain steps; otherwise only an occasional probe (every 16 steps, doubling to 256) keeps the
// estimate fresh, so text that does not repeat its context pays almost nothing.
class DraftGate {
 public:
  DraftGate(SpeculationStats& stats, bool always) : stats_(stats), acceptance_(stats.acceptance), always_(always) {}
  bool should_draft();
  void on_plain_step(double seconds);
  // A verification kept `accepted` drafts and took `seconds` in all (forward, sampling, rollback).
  void on_verified(int accepted, double seconds);

 private:
  SpeculationStats& stats_;
  double acceptance_;  // this request's moving average
  bool always_;
};

}  // namespace sanctum::spec

namespace sanctum::spec {
// Applies the compatibility environment overrides SANCTUM_PLD_MAX_LOOKUP (max draft tokens) and
// SANCTUM_PLD_NGRAM_SIZE (longest n-gram) on top of `params`; malformed values throw Error.
PromptLookupParams with_environment_overrides(PromptLookupParams params);
}  // namespace sanctum::spec

#pragma once
// Prompt-lookup drafting: the last n tokens of the context (n = ngram, cascading down to 1) are
// looked up earlier in the context; the tokens that followed the most recent earlier match are the
// draft. No second model: copy-heavy outputs (quotes, code edits, extraction) repeat their input.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace sanctum::spec {

struct PromptLookupParams {
  int max_draft = 5;    // most tokens proposed per step (the gate picks the length that pays, up to this)
  int ngram = 3;        // longest suffix looked up; shorter ones are tried when it has no match
  bool always = false;  // draft at every step, even where the measured cost says it does not pay
};

// Draft continuation of `context` (prompt + generated so far); empty when nothing matches. A match
// whose continuation runs into the end of the context is extended with the same period (a loop
// "a b a b" drafts "a b a ..."), so repetitive output gets full-length drafts.
std::vector<int32_t> propose(std::span<const int32_t> context, const PromptLookupParams& params, int max_tokens);

// Longest verifying forward whose cost is learned: [token, up to kMaxRows - 1 drafts].
inline constexpr int kMaxRows = 65;

// What speculation costs on one model and machine, learned across requests (one per inference
// worker; not thread-safe). A forward over r rows costs cost[r] plain steps: close to 1 on a
// memory-bound model, close to r on a compute-bound one, and not even monotone in r where a kernel
// tiles rows (8 rows can cost less than 7). So the cost is measured per row count, not assumed.
struct SpeculationStats {
  double step_seconds = 0.0;                // moving average of a plain one-token step (0: not measured yet)
  std::array<double, kMaxRows + 1> cost{};  // cost[r]: verification over r rows / plain step (0: not measured)
  double accepted = 2.0, rejected = 1.0;    // decayed counts of draft tokens kept / first misses (prior for a request)
  int until_probe = 0;                      // plain steps before the next probe while drafting does not pay
  int probe_interval = 16;                  // doubles up to 256 while probes keep failing
};

// Per request: picks the draft length d that maximises expected tokens per verification over its
// cost, where a draft token is kept with probability p (this request's decayed acceptance) and
// d drafts yield (1 - p^(d+1)) / (1 - p) tokens. An unmeasured row count is estimated linearly
// from its measured neighbours (before any measurement: one step, so the longest draft is tried
// first and sets the slope). When no length pays,
// only an occasional probe (every 16 steps, doubling to 256) keeps p fresh, so text that does not
// repeat its context pays almost nothing.
class DraftGate {
 public:
  DraftGate(SpeculationStats& stats, int max_draft, bool always)
      : stats_(stats), accepted_(stats.accepted), rejected_(stats.rejected), max_draft_(std::clamp(max_draft, 0, kMaxRows - 1)),
        always_(always) {}
  // Draft tokens to propose at this step (0: a plain step).
  int draft_length();
  void on_plain_step(double seconds);
  // After a draft_length() of 0 (or a lookup that found nothing): the plain steps in a row, this one
  // included, that the gate will keep asking for while nothing is verified, so that they can be
  // queued without asking before each.
  int plain_run() const;
  // A verification over `rows` rows kept `accepted` of `drafted` tokens and took `seconds` in all
  // (forward, sampling, rollback).
  void on_verified(int rows, int drafted, int accepted, double seconds);
  // A forward over `rows` rows without drafts (it replays tokens of a rolled-back verification).
  void on_replay_step(int rows, double seconds) { record_cost(rows, seconds); }
  double acceptance() const { return accepted_ / (accepted_ + rejected_); }

 private:
  int best_length(double p) const;  // 0 when no draft length is expected to pay
  void record_cost(int rows, double seconds);
  double cost_of(int rows) const;  // in plain steps, measured or estimated
  SpeculationStats& stats_;
  double accepted_, rejected_;  // this request's decayed counts
  int max_draft_;
  bool always_;
};

}  // namespace sanctum::spec

#include "engine/spec/prompt_lookup.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "base/error.h"

namespace sanctum::spec {

std::vector<int32_t> propose(std::span<const int32_t> context, const PromptLookupParams& params, int max_tokens) {
  const int limit = std::min(params.max_draft, max_tokens);
  const auto len = static_cast<int64_t>(context.size());
  if (limit <= 0) return {};
  for (int n = static_cast<int>(std::min<int64_t>(params.ngram, len - 1)); n >= 1; --n) {
    const int32_t* suffix = context.data() + len - n;
    // Most recent earlier occurrence of the suffix (its continuation starts before the end).
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix, suffix + n, context.data() + start)) continue;
      const int64_t from = start + n;
      std::vector<int32_t> draft;
      draft.reserve(static_cast<size_t>(limit));
      for (int64_t i = 0; i < limit; ++i) {  // past the end of the context: the same period again
        const int64_t at = from + i;
        draft.push_back(at < len ? context[static_cast<size_t>(at)] : draft[static_cast<size_t>(at - len)]);
      }
      return draft;
    }
  }
  return {};
}

double DraftGate::cost_of(int rows) const {
  const auto& c = stats_.cost;
  if (c[static_cast<size_t>(rows)] > 0.0) return c[static_cast<size_t>(rows)];
  // Unmeasured: linear through the nearest measured row counts (a plain step, 1 row, costs 1),
  // extrapolated past the last one; with nothing measured yet, 1 (so the longest draft is tried).
  int lo = 1;
  double lo_cost = 1.0;
  for (int r = rows - 1; r >= 2; --r)
    if (c[static_cast<size_t>(r)] > 0.0) {
      lo = r;
      lo_cost = c[static_cast<size_t>(r)];
      break;
    }
  for (int r = rows + 1; r <= kMaxRows; ++r)
    if (c[static_cast<size_t>(r)] > 0.0) return lo_cost + (c[static_cast<size_t>(r)] - lo_cost) * (rows - lo) / (r - lo);
  return lo == 1 ? 1.0 : 1.0 + (lo_cost - 1.0) * (rows - 1) / (lo - 1);
}

int DraftGate::best_length(double p) const {
  int best = 0;
  // A plain step yields one token per step; drafting must beat it clearly, since what the cost
  // does not see (lookup, bookkeeping) and timing noise weigh most where steps are short.
  double best_rate = 1.1;
  double expected = 1.0, pk = 1.0;
  for (int d = 1; d <= max_draft_; ++d) {
    pk *= p;
    expected += pk;  // 1 + p + ... + p^d
    const double rate = expected / cost_of(d + 1);
    if (rate > best_rate * 1.02) {  // a longer draft must pay clearly (timing noise)
      best_rate = rate;
      best = d;
    }
  }
  return best;
}

int DraftGate::draft_length() {
  if (max_draft_ <= 0) return 0;
  if (always_) return max_draft_;
  if (stats_.step_seconds == 0.0) return 0;  // time a plain step first: the baseline
  if (const int d = best_length(acceptance()); d > 0) {
    stats_.probe_interval = 16;
    return d;
  }
  if (stats_.until_probe > 0) return 0;
  stats_.until_probe = stats_.probe_interval;
  stats_.probe_interval = std::min(stats_.probe_interval * 2, 256);
  // The length that would pay if drafts were mostly kept; where even that does not pay, the
  // cheapest probe (one draft) still refreshes the acceptance estimate.
  return std::max(1, best_length(0.9));
}

int DraftGate::plain_run() const {
  if (max_draft_ <= 0) return std::numeric_limits<int>::max();
  if (always_ || stats_.step_seconds == 0.0 || best_length(acceptance()) > 0) return 1;
  return std::max(1, stats_.until_probe);
}

void DraftGate::on_plain_step(double seconds) {
  if (stats_.until_probe > 0) --stats_.until_probe;
  stats_.step_seconds = stats_.step_seconds == 0.0 ? seconds : 0.9 * stats_.step_seconds + 0.1 * seconds;
}

void DraftGate::on_verified(int rows, int drafted, int accepted, double seconds) {
  const double miss = accepted < drafted ? 1.0 : 0.0;
  accepted_ = 0.7 * accepted_ + accepted;  // recent verifications weigh most
  rejected_ = 0.7 * rejected_ + miss;
  stats_.accepted = 0.95 * stats_.accepted + 0.05 * accepted;
  stats_.rejected = 0.95 * stats_.rejected + 0.05 * miss;
  record_cost(rows, seconds);
}

void DraftGate::record_cost(int rows, double seconds) {
  if (stats_.step_seconds > 0.0 && rows >= 2 && rows <= kMaxRows) {
    double& c = stats_.cost[static_cast<size_t>(rows)];
    const double ratio = seconds / stats_.step_seconds;
    c = c == 0.0 ? ratio : 0.8 * c + 0.2 * ratio;
  }
}

}  // namespace sanctum::spec

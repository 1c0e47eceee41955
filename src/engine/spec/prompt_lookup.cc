#include "engine/spec/prompt_lookup.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "base/error.h"

namespace sanctum::spec {

std::vector<int32_t> propose(std::span<const int32_t> context, const PromptLookupParams& params, int max_tokens) {
  const int limit = std::min(params.max_draft, max_tokens);
  const auto len = static_cast<int64_t>(context.size());
  if (limit <= 0) return {};
  for (int n = std::min<int64_t>(params.ngram, len - 1); n >= 1; --n) {
    const int32_t* suffix = context.data() + len - n;
    // Most recent earlier occurrence of the suffix whose continuation exists.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix, suffix + n, context.data() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(limit, len - from);
      if (count <= 0) continue;
      return {context.begin() + from, context.begin() + from + count};
    }
  }
  return {};
}

bool DraftGate::should_draft() {
  if (always_) return true;
  if (stats_.step_seconds == 0.0) return false;  // time a plain step first: the baseline
  if (stats_.verify_ratio == 0.0 || acceptance_ + 1.0 >= stats_.verify_ratio) {
    stats_.probe_interval = 16;
    return true;
  }
  if (stats_.until_probe > 0) return false;
  stats_.until_probe = stats_.probe_interval;
  stats_.probe_interval = std::min(stats_.probe_interval * 2, 256);
  return true;
}

void DraftGate::on_plain_step(double seconds) {
  if (stats_.until_probe > 0) --stats_.until_probe;
  stats_.step_seconds = stats_.step_seconds == 0.0 ? seconds : 0.9 * stats_.step_seconds + 0.1 * seconds;
}

void DraftGate::on_verified(int accepted, double seconds) {
  acceptance_ = 0.5 * acceptance_ + 0.5 * accepted;
  stats_.acceptance = 0.9 * stats_.acceptance + 0.1 * accepted;
  if (stats_.step_seconds > 0.0) {
    const double ratio = seconds / stats_.step_seconds;
    stats_.verify_ratio = stats_.verify_ratio == 0.0 ? ratio : 0.8 * stats_.verify_ratio + 0.2 * ratio;
  }
}

}  // namespace sanctum::spec

namespace sanctum::spec {
namespace {
int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  check(end && *end == '\0' && x >= lo && x <= hi, ErrorKind::invalid_argument,
        std::string(name) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
  return static_cast<int>(x);
}
}  // namespace

PromptLookupParams with_environment_overrides(PromptLookupParams params) {
  params.max_draft = env_int("SANCTUM_PLD_MAX_LOOKUP", params.max_draft, 0, 64);
  params.ngram = env_int("SANCTUM_PLD_NGRAM_SIZE", params.ngram, 1, 16);
  return params;
}
}  // namespace sanctum::spec

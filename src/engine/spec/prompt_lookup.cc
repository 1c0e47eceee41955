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

void DraftBackoff::on_verified(int drafted, int accepted) {
  if (accepted > 0) {
    misses_ = 0;
    next_pause_ = 8;
    return;
  }
  if (drafted > 0 && ++misses_ >= 3) {
    pause_ = next_pause_;
    next_pause_ = std::min(next_pause_ * 2, 256);
    misses_ = 0;
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

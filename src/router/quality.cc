#include "router/quality.h"

#include <algorithm>
#include <cctype>

namespace sanctum::router {

const char* to_string(QualityFlag flag) {
  switch (flag) {
    case QualityFlag::none: return "none";
    case QualityFlag::empty: return "empty";
    case QualityFlag::repetition: return "repetition";
    case QualityFlag::utf8: return "utf8";
    case QualityFlag::canary: return "canary";
  }
  return "unknown";
}

namespace {

bool has_content_char(std::string_view unit) {
  for (char c : unit) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80 || std::isalnum(u)) return true;
  }
  return false;
}

}  // namespace

std::optional<Repetition> trailing_repetition(std::string_view text, const RepetitionParams& params) {
  if (!params.enabled || params.min_repeats < 2 || params.max_period < 1) return std::nullopt;
  const size_t n = text.size();
  for (size_t p = 1; p <= static_cast<size_t>(params.max_period) && 2 * p <= n; ++p) {
    // Bytes needed for a verdict: min_repeats units spanning at least min_chars.
    const size_t need = std::max(p * static_cast<size_t>(params.min_repeats), static_cast<size_t>(std::max(params.min_chars, 0)));
    if (need > n) continue;
    // Length of the tail in which text[i] == text[i + p]: the loop spans that plus one unit.
    size_t run = 0;
    while (run + p < n && run + p < need && text[n - 1 - run] == text[n - 1 - run - p]) ++run;
    const size_t span = run + p;
    if (span < need) continue;
    const std::string_view unit = text.substr(n - p);
    if (!has_content_char(unit)) continue;
    // Count the whole loop for the report (bounded by the text).
    size_t full = run;
    while (full + p < n && text[n - 1 - full] == text[n - 1 - full - p]) ++full;
    return Repetition{std::string(unit), static_cast<int>((full + p) / p)};
  }
  return std::nullopt;
}

}  // namespace sanctum::router

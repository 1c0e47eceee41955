#pragma once
// Quality detectors on completion text: the router refuses to pass on garbage. Each finds one kind
// of broken output a sick upstream produces:
//  - empty: a completion with no text (and no tool calls / reasoning);
//  - repetition: the text ends in a loop of one short unit ("190/ / 190/ / ..."), the signature of
//    a degenerate decode; a unit must contain a letter, digit or non-ASCII byte, so rules ("-----")
//    and table borders are not loops;
//  - utf8: bytes that are not valid UTF-8 (checked on the raw upstream bytes).
#include <optional>
#include <string>
#include <string_view>

namespace sanctum::router {

struct RepetitionParams {
  bool enabled = true;
  int min_repeats = 10;  // the unit occurs at least this many times in a row ...
  int max_period = 64;   // ... is at most this many bytes long ...
  int min_chars = 60;    // ... and the loop spans at least this many bytes
};

struct Repetition {
  std::string unit;
  int repeats = 0;
};

// The loop the text ends in, if any (smallest period first).
std::optional<Repetition> trailing_repetition(std::string_view text, const RepetitionParams& params);

enum class QualityFlag { none, empty, repetition, utf8, canary };
const char* to_string(QualityFlag flag);

}  // namespace sanctum::router

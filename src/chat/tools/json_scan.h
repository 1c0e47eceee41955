#pragma once
// Where a JSON object or array that is still streaming in ends, without parsing it: strings and
// escapes are skipped, brackets counted. Lets a parser hold a value until it is whole.
#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sanctum {

struct JsonScan {
  enum class State { complete, incomplete, invalid };
  State state = State::incomplete;
  size_t end = 0;  // complete: one past the closing bracket
};

inline constexpr int kMaxToolJsonDepth = 64;

// `text` must start (after whitespace) with '{' or '['; deeper nesting than kMaxToolJsonDepth is invalid.
JsonScan scan_json_container(std::string_view text);

// Parses `text` as JSON; discarded (is_discarded()) when invalid or nested past kMaxToolJsonDepth.
nlohmann::ordered_json parse_json_lenient(std::string_view text);

// Compact JSON text; invalid UTF-8 becomes U+FFFD instead of throwing.
std::string dump_json(const nlohmann::ordered_json& value);

bool is_json_space(char c);
std::string_view trim_json_space(std::string_view s);

}  // namespace sanctum

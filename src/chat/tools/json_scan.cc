#include "chat/tools/json_scan.h"

namespace sanctum {

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim_json_space(std::string_view s) {
  while (!s.empty() && is_json_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_json_space(s.back())) s.remove_suffix(1);
  return s;
}

JsonScan scan_json_container(std::string_view text) {
  JsonScan r;
  size_t i = 0;
  while (i < text.size() && is_json_space(text[i])) ++i;
  if (i == text.size()) return r;
  if (text[i] != '{' && text[i] != '[') {
    r.state = JsonScan::State::invalid;
    return r;
  }
  int depth = 0;
  bool in_string = false, escaped = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxToolJsonDepth) {
        r.state = JsonScan::State::invalid;
        return r;
      }
    } else if (c == '}' || c == ']') {
      if (--depth == 0) {
        r.state = JsonScan::State::complete;
        r.end = i + 1;
        return r;
      }
    }
  }
  return r;
}

nlohmann::ordered_json parse_json_lenient(std::string_view text) {
  const std::string_view t = trim_json_space(text);
  // Scalars have no depth; containers must close within the depth limit before the parser sees them.
  if (!t.empty() && (t.front() == '{' || t.front() == '[')) {
    const JsonScan s = scan_json_container(t);
    if (s.state != JsonScan::State::complete || s.end != t.size())
      return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  }
  return nlohmann::ordered_json::parse(t, nullptr, false);
}

std::string dump_json(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace sanctum

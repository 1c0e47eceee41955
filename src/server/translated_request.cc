#include "server/translated_request.h"

#include <atomic>
#include <cstdlib>
#include <random>

namespace sanctum::server {

namespace {

// `path` is `prefix` or `prefix` followed by a further segment (".x" or "[i]").
bool has_segment_prefix(std::string_view path, std::string_view prefix) {
  if (!path.starts_with(prefix)) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[';
}

}  // namespace

void ChatTranslation::add_message(RequestJson message, std::string origin) {
  if (!body.contains("messages")) body["messages"] = RequestJson::array();
  body["messages"].push_back(std::move(message));
  message_origins.push_back(std::move(origin));
}

std::string ChatTranslation::client_param(const std::string& p) const {
  if (p == "messages") return messages_param;
  if (p.starts_with("messages[")) {
    const size_t close = p.find(']');
    const size_t k = std::strtoul(p.c_str() + 9, nullptr, 10);
    if (close != std::string::npos && k < message_origins.size()) return message_origins[k] + p.substr(close + 1);
    return messages_param;
  }
  if (p.starts_with("tools[")) {
    const size_t close = p.find(']');
    std::string head = p.substr(0, close + 1), rest = p.substr(close + 1);
    if (rest.starts_with(".function")) rest.erase(0, 9);
    for (const auto& [from, to] : tool_fields)
      if (has_segment_prefix(rest, "." + from)) return head + "." + to + rest.substr(from.size() + 1);
    return head + rest;
  }
  if (p.starts_with("tool_choice.function")) return "tool_choice" + p.substr(20);
  for (const auto& [from, to] : fields)
    if (has_segment_prefix(p, from)) return to + p.substr(from.size());
  return p;
}

ApiError ChatTranslation::renamed(const ApiError& e) const {
  return ApiError(e.status(), e.type(), e.what(), e.param().empty() ? "" : client_param(e.param()), e.code());
}

OpenAiRequest parse_translated(const ChatTranslation& t) {
  try {
    OpenAiRequest r = parse_chat_request(t.body);
    for (RequestImage& im : r.images) im.param = t.client_param(im.param);  // later image errors name the client's field
    return r;
  } catch (const ApiError& e) {
    throw t.renamed(e);
  }
}

bool is_given(const RequestJson& obj, std::string_view key) {
  auto it = obj.find(key);
  return it != obj.end() && !it->is_null();
}

const std::string& require_string(const RequestJson& obj, std::string_view key, const std::string& param) {
  if (!is_given(obj, key)) throw bad_request("'" + std::string(key) + "' is required", param);
  const RequestJson& v = obj.at(key);
  if (!v.is_string()) throw bad_request("'" + std::string(key) + "' must be a string, not " + type_name(v), param);
  return v.get_ref<const std::string&>();
}

const RequestJson& require_array(const RequestJson& obj, std::string_view key, const std::string& param) {
  if (!is_given(obj, key)) throw bad_request("'" + std::string(key) + "' is required", param);
  const RequestJson& v = obj.at(key);
  if (!v.is_array()) throw bad_request("'" + std::string(key) + "' must be an array, not " + type_name(v), param);
  return v;
}

bool optional_bool(const RequestJson& obj, std::string_view key, bool fallback, const std::string& param) {
  if (!is_given(obj, key)) return fallback;
  const RequestJson& v = obj.at(key);
  if (!v.is_boolean()) throw bad_request("'" + std::string(key) + "' must be a boolean, not " + type_name(v), param);
  return v.get<bool>();
}

std::string index_suffix(size_t i) {
  std::string s(1, '[');
  s += std::to_string(i);
  s += ']';
  return s;
}

std::string object_id(std::string_view prefix) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  // A counter mixed with a per-process salt: unique without a lock, not guessable across restarts.
  // The first 12 letters hold all 64 bits of `a`, a bijection of the counter; `b` scrambles it.
  const uint64_t n = ++counter;
  uint64_t a = salt ^ (n * 0x9E3779B97F4A7C15ull);
  uint64_t b = (a ^ (a >> 31)) * 0xBF58476D1CE4E5B9ull;
  b ^= b >> 29;
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) {
    uint64_t& x = i < 12 ? a : b;
    id += kAlphabet[x % 62];
    x /= 62;
  }
  return id;
}

}  // namespace sanctum::server

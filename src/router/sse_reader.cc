#include "router/sse_reader.h"

#include <nlohmann/json.hpp>

namespace sanctum::router {

using nlohmann::json;

bool SseSplitter::feed(std::string_view bytes, std::vector<std::string>& out) {
  buffer_.append(bytes);
  size_t start = 0;
  // Resume scanning a little before the old end: a terminator may straddle two reads.
  size_t i = scanned_ > 3 ? scanned_ - 3 : 0;
  while (i < buffer_.size()) {
    size_t end = std::string::npos;
    if (buffer_[i] == '\n') {
      if (i + 1 < buffer_.size() && buffer_[i + 1] == '\n') end = i + 2;
      else if (i + 2 < buffer_.size() && buffer_[i + 1] == '\r' && buffer_[i + 2] == '\n') end = i + 3;
    }
    if (end == std::string::npos) {
      ++i;
      continue;
    }
    out.emplace_back(buffer_, start, end - start);
    start = end;
    i = end;
  }
  buffer_.erase(0, start);
  scanned_ = buffer_.size();
  return buffer_.size() <= max_event_bytes_;
}

namespace {

std::string data_of(std::string_view event) {
  std::string data;
  bool first = true;
  size_t pos = 0;
  while (pos < event.size()) {
    size_t nl = event.find('\n', pos);
    std::string_view line = event.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? event.size() : nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.rfind("data:", 0) != 0) continue;
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (!first) data += '\n';
    data.append(line);
    first = false;
  }
  return data;
}

void append_string(const json& obj, const char* key, std::string& out) {
  auto it = obj.find(key);
  if (it != obj.end() && it->is_string()) out += it->get_ref<const std::string&>();
}

std::optional<int64_t> usage_total(const json& j) {
  auto u = j.find("usage");
  if (u == j.end() || !u->is_object()) return std::nullopt;
  auto t = u->find("total_tokens");
  if (t != u->end() && t->is_number_integer()) return t->get<int64_t>();
  int64_t sum = 0;
  bool any = false;
  for (const char* k : {"prompt_tokens", "completion_tokens"}) {
    auto v = u->find(k);
    if (v != u->end() && v->is_number_integer()) {
      sum += v->get<int64_t>();
      any = true;
    }
  }
  return any ? std::optional<int64_t>(sum) : std::nullopt;
}

}  // namespace

SseEventInfo inspect_sse_event(std::string_view event) {
  SseEventInfo info;
  const std::string data = data_of(event);
  if (data.empty()) return info;
  if (data == "[DONE]") {
    info.done = true;
    return info;
  }
  json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    info.parse_failed = true;
    return info;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    info.error = true;
    if (e->is_object()) append_string(*e, "message", info.error_message);
    else if (e->is_string()) info.error_message = e->get<std::string>();
  }
  info.total_tokens = usage_total(j);
  auto choices = j.find("choices");
  if (choices != j.end() && choices->is_array()) {
    for (const json& c : *choices) {
      if (!c.is_object()) continue;
      auto idx = c.find("index");
      if (idx != c.end() && idx->is_number_integer() && idx->get<int64_t>() != 0) continue;
      append_string(c, "text", info.text);
      auto d = c.find("delta");
      if (d != c.end() && d->is_object()) {
        append_string(*d, "content", info.text);
        append_string(*d, "reasoning_content", info.text);
        auto tc = d->find("tool_calls");
        if (tc != d->end() && tc->is_array() && !tc->empty()) info.has_tool_call = true;
      }
    }
  }
  return info;
}

CompletionInfo inspect_completion_body(std::string_view body) {
  CompletionInfo info;
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return info;
  info.parsed = true;
  info.total_tokens = usage_total(j);
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array()) return info;
  for (const json& c : *choices) {
    if (!c.is_object()) continue;
    std::string text;
    append_string(c, "text", text);
    auto m = c.find("message");
    bool tool = false;
    std::string reasoning;
    if (m != c.end() && m->is_object()) {
      append_string(*m, "content", text);
      append_string(*m, "reasoning_content", reasoning);
      auto tc = m->find("tool_calls");
      tool = tc != m->end() && tc->is_array() && !tc->empty();
    }
    if (!text.empty() || !reasoning.empty() || tool) info.empty = false;
    if (!info.text.empty()) info.text += '\n';
    info.text += text;
  }
  return info;
}

}  // namespace sanctum::router

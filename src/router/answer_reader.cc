#include "router/answer_reader.h"

#include <nlohmann/json.hpp>

#include "router/sse_reader.h"

namespace sanctum::router {

using nlohmann::json;

namespace {

void append_string(const json& obj, const char* key, std::string& out) {
  auto it = obj.find(key);
  if (it != obj.end() && it->is_string()) out += it->get_ref<const std::string&>();
}

std::optional<int64_t> integer(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it != obj.end() && it->is_number_integer()) return it->get<int64_t>();
  return std::nullopt;
}

const json* object_at(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? &*it : nullptr;
}

const json* array_at(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_array() ? &*it : nullptr;
}

std::string type_of(const json& obj) {
  std::string t;
  append_string(obj, "type", t);
  return t;
}

// usage.total_tokens, or the sum of whichever of the two counts (either dialect's names) are there.
std::optional<int64_t> usage_total(const json& holder) {
  const json* u = object_at(holder, "usage");
  if (!u) return std::nullopt;
  if (auto t = integer(*u, "total_tokens")) return t;
  int64_t sum = 0;
  bool any = false;
  for (const char* k : {"prompt_tokens", "completion_tokens", "input_tokens", "output_tokens"})
    if (auto v = integer(*u, k)) {
      sum += *v;
      any = true;
    }
  return any ? std::optional<int64_t>(sum) : std::nullopt;
}

void read_error(const json& j, SseEventInfo& info) {
  auto e = j.find("error");
  if (e == j.end() || e->is_null()) return;
  info.error = true;
  if (e->is_object()) append_string(*e, "message", info.error_message);
  else if (e->is_string()) info.error_message = e->get<std::string>();
}

void openai_event(const json& j, SseEventInfo& info) {
  read_error(j, info);
  info.total_tokens = usage_total(j);
  const json* choices = array_at(j, "choices");
  if (!choices) return;
  for (const json& c : *choices) {
    if (!c.is_object()) continue;
    if (auto idx = integer(c, "index"); idx && *idx != 0) continue;
    append_string(c, "text", info.text);
    if (const json* d = object_at(c, "delta")) {
      append_string(*d, "content", info.text);
      append_string(*d, "reasoning_content", info.text);
      const json* tc = array_at(*d, "tool_calls");
      if (tc && !tc->empty()) info.has_tool_call = true;
    }
  }
}

void messages_event(const json& j, SseEventInfo& info) {
  const std::string type = type_of(j);
  if (type == "error") read_error(j, info);
  if (type == "message_stop") info.done = true;
  if (type == "message_start") {
    if (const json* m = object_at(j, "message"); m && object_at(*m, "usage")) {
      info.input_tokens = integer(*object_at(*m, "usage"), "input_tokens");
      info.output_tokens = integer(*object_at(*m, "usage"), "output_tokens");
    }
  }
  if (type == "message_delta") {
    if (const json* u = object_at(j, "usage")) {
      info.input_tokens = integer(*u, "input_tokens");
      info.output_tokens = integer(*u, "output_tokens");
    }
  }
  if (type == "content_block_start") {
    if (const json* b = object_at(j, "content_block"); b && type_of(*b) == "tool_use") info.has_tool_call = true;
  }
  if (type == "content_block_delta") {
    if (const json* d = object_at(j, "delta")) {
      append_string(*d, "text", info.text);
      append_string(*d, "thinking", info.text);
      if (type_of(*d) == "input_json_delta") info.has_tool_call = true;
    }
  }
}

void responses_event(const json& j, SseEventInfo& info) {
  const std::string type = type_of(j);
  if (type == "error") {
    info.error = true;
    append_string(j, "message", info.error_message);
  }
  if (type == "response.output_text.delta" || type == "response.reasoning_text.delta") append_string(j, "delta", info.text);
  if (type == "response.function_call_arguments.delta") info.has_tool_call = true;
  if (type == "response.output_item.added") {
    if (const json* item = object_at(j, "item"); item && type_of(*item) == "function_call") info.has_tool_call = true;
  }
  if (type == "response.completed" || type == "response.incomplete" || type == "response.failed") {
    info.done = true;
    if (const json* r = object_at(j, "response")) {
      info.total_tokens = usage_total(*r);
      if (type == "response.failed") {
        SseEventInfo failed;
        read_error(*r, failed);
        info.error = true;
        info.error_message = failed.error_message;
      }
    }
  }
}

// Text of a message's or reasoning item's content parts.
void content_texts(const json& item, std::string& text, bool& any) {
  const json* parts = array_at(item, "content");
  if (!parts) return;
  for (const json& p : *parts) {
    if (!p.is_object()) continue;
    const size_t before = text.size();
    append_string(p, "text", text);
    append_string(p, "thinking", text);
    if (text.size() > before) any = true;
    if (type_of(p) == "tool_use") any = true;
  }
}

void openai_body(const json& j, CompletionInfo& info) {
  const json* choices = array_at(j, "choices");
  if (!choices) return;
  for (const json& c : *choices) {
    if (!c.is_object()) continue;
    std::string text;
    append_string(c, "text", text);
    bool tool = false;
    std::string reasoning;
    if (const json* m = object_at(c, "message")) {
      append_string(*m, "content", text);
      append_string(*m, "reasoning_content", reasoning);
      const json* tc = array_at(*m, "tool_calls");
      tool = tc && !tc->empty();
    }
    if (!text.empty() || !reasoning.empty() || tool) info.empty = false;
    if (!info.text.empty()) info.text += '\n';
    info.text += text;
  }
}

void responses_body(const json& j, CompletionInfo& info) {
  const json* output = array_at(j, "output");
  if (!output) return;
  bool any = false;
  for (const json& item : *output) {
    if (!item.is_object()) continue;
    if (type_of(item) == "function_call") any = true;
    std::string text;
    content_texts(item, text, any);
    if (const json* summary = array_at(item, "summary"))
      for (const json& s : *summary)
        if (s.is_object()) append_string(s, "text", text);
    if (!text.empty()) any = true;
    if (!info.text.empty() && !text.empty()) info.text += '\n';
    info.text += text;
  }
  info.empty = !any;
}

}  // namespace

SseEventInfo inspect_sse_event(std::string_view event, ApiDialect dialect) {
  SseEventInfo info;
  const std::string data = sse_data(event);
  if (data.empty()) return info;
  if (dialect == ApiDialect::openai && data == "[DONE]") {
    info.done = true;
    return info;
  }
  json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    info.parse_failed = true;
    return info;
  }
  switch (dialect) {
    case ApiDialect::messages: messages_event(j, info); break;
    case ApiDialect::responses: responses_event(j, info); break;
    default: openai_event(j, info); break;
  }
  return info;
}

CompletionInfo inspect_completion_body(std::string_view body, ApiDialect dialect) {
  CompletionInfo info;
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return info;
  info.parsed = true;
  info.total_tokens = usage_total(j);
  switch (dialect) {
    case ApiDialect::messages: {
      bool any = false;
      content_texts(j, info.text, any);
      info.empty = !any;
      break;
    }
    case ApiDialect::responses: responses_body(j, info); break;
    case ApiDialect::tokens:
    case ApiDialect::message_tokens: info.empty = false; break;
    default: openai_body(j, info); break;
  }
  return info;
}

}  // namespace sanctum::router

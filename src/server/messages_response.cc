#include "server/messages_response.h"

#include "chat/tools/json_scan.h"

namespace sanctum::server {

using json = nlohmann::ordered_json;

std::string sse_frame(const SseEvent& e) {
  return "event: " + e.name + "\ndata: " + e.data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string stop_reason(const ChoiceText& c) {
  if (c.finish_reason == "length") return "max_tokens";
  if (c.finish_reason == "tool_calls") return "tool_use";
  return c.stop_string.empty() ? "end_turn" : "stop_sequence";
}

namespace {

json usage(int input_tokens, int output_tokens) { return {{"input_tokens", input_tokens}, {"output_tokens", output_tokens}}; }

// The parsers hand over arguments that are a JSON object; the SDK needs `input` to be one.
json tool_input(const std::string& arguments) {
  json input = parse_json_lenient(arguments);
  return input.is_object() ? input : json::object();
}

json thinking_block(const std::string& text) { return {{"type", "thinking"}, {"thinking", text}, {"signature", ""}}; }

}  // namespace

json message_json(const MessageMeta& meta, const ChoiceText& c) {
  json content = json::array();
  if (!c.reasoning.empty()) content.push_back(thinking_block(meta.show_thinking ? c.reasoning : ""));
  if (!c.content.empty()) content.push_back({{"type", "text"}, {"text", c.content}});
  for (const ToolCallText& t : c.tool_calls)
    content.push_back({{"type", "tool_use"}, {"id", t.id}, {"name", t.name}, {"input", tool_input(t.arguments)}});
  return {{"id", meta.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", meta.model},
          {"content", content},
          {"stop_reason", stop_reason(c)},
          {"stop_sequence", c.stop_string.empty() ? json() : json(c.stop_string)},
          {"usage", usage(meta.input_tokens, c.completion_tokens)}};
}

std::vector<SseEvent> MessageEvents::start() const {
  json message = {{"id", meta_.id},           {"type", "message"},
                  {"role", "assistant"},      {"model", meta_.model},
                  {"content", json::array()}, {"stop_reason", nullptr},
                  {"stop_sequence", nullptr}, {"usage", usage(meta_.input_tokens, 0)}};
  return {{"message_start", {{"type", "message_start"}, {"message", message}}}};
}

void MessageEvents::open(Block kind, json content_block, std::vector<SseEvent>& out) {
  close(out);
  open_ = kind;
  ++index_;
  out.push_back({"content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(content_block)}}});
  if (!pinged_) {
    pinged_ = true;
    out.push_back({"ping", {{"type", "ping"}}});
  }
}

void MessageEvents::close(std::vector<SseEvent>& out) {
  if (open_ == Block::none) return;
  out.push_back({"content_block_stop", {{"type", "content_block_stop"}, {"index", index_}}});
  open_ = Block::none;
}

void MessageEvents::block_delta(json delta, std::vector<SseEvent>& out) const {
  out.push_back({"content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}}});
}

std::vector<SseEvent> MessageEvents::delta(const ChoiceDelta& d) {
  std::vector<SseEvent> out;
  // Within one delta reasoning precedes content, and content precedes the calls.
  if (!d.reasoning.empty()) {
    if (open_ != Block::thinking) open(Block::thinking, thinking_block(""), out);
    if (meta_.show_thinking) block_delta({{"type", "thinking_delta"}, {"thinking", d.reasoning}}, out);
  }
  if (!d.content.empty()) {
    if (open_ != Block::text) open(Block::text, {{"type", "text"}, {"text", ""}}, out);
    block_delta({{"type", "text_delta"}, {"text", d.content}}, out);
  }
  for (const ToolCallDelta& t : d.tool_calls) {
    if (!t.name.empty()) {
      open(Block::tool_use, {{"type", "tool_use"}, {"id", t.id}, {"name", t.name}, {"input", json::object()}}, out);
      tool_call_ = t.index;
    }
    if (open_ == Block::tool_use && t.index == tool_call_ && !t.arguments.empty())
      block_delta({{"type", "input_json_delta"}, {"partial_json", t.arguments}}, out);
  }
  if (!d.finish_reason) return out;
  close(out);
  ChoiceText end;
  end.finish_reason = *d.finish_reason;
  end.stop_string = d.stop_string;
  out.push_back({"message_delta",
                 {{"type", "message_delta"},
                  {"delta", {{"stop_reason", stop_reason(end)}, {"stop_sequence", d.stop_string.empty() ? json() : json(d.stop_string)}}},
                  {"usage", usage(meta_.input_tokens, d.completion_tokens)}}});
  out.push_back({"message_stop", {{"type", "message_stop"}}});
  return out;
}

std::string anthropic_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

json anthropic_error_json(const ApiError& e) {
  return {{"type", "error"}, {"error", {{"type", anthropic_error_type(e.status())}, {"message", e.what()}}}};
}

}  // namespace sanctum::server

#include "server/responses_response.h"

#include "server/translated_request.h"

namespace sanctum::server {

using json = ResponseOutput::json;

namespace {

json text_part(const char* type) {
  json p = {{"type", type}, {"text", ""}};
  if (std::string_view(type) == "output_text") p["annotations"] = json::array();
  return p;
}

json echoed(const json& echo, const char* key, json fallback) { return echo.contains(key) ? echo[key] : fallback; }

}  // namespace

json ResponseOutput::object(const char* status) const {
  const json& e = head_.echo;
  json usage;
  if (std::string_view(status) != "in_progress")
    usage = {{"input_tokens", input_tokens_},
             {"input_tokens_details", {{"cached_tokens", 0}}},
             {"output_tokens", output_tokens_},
             {"output_tokens_details", {{"reasoning_tokens", 0}}},
             {"total_tokens", input_tokens_ + output_tokens_}};
  return {{"id", head_.id},
          {"object", "response"},
          {"created_at", head_.created_at},
          {"status", status},
          {"background", false},
          {"error", nullptr},
          {"incomplete_details", std::string_view(status) == "incomplete" ? json{{"reason", "max_output_tokens"}} : json()},
          {"instructions", echoed(e, "instructions", nullptr)},
          {"max_output_tokens", echoed(e, "max_output_tokens", nullptr)},
          {"model", head_.model},
          {"output", std::string_view(status) == "in_progress" ? json::array() : items_},
          {"parallel_tool_calls", echoed(e, "parallel_tool_calls", true)},
          {"previous_response_id", echoed(e, "previous_response_id", nullptr)},
          {"reasoning", echoed(e, "reasoning", {{"effort", nullptr}, {"summary", nullptr}})},
          {"store", head_.store},
          {"temperature", head_.temperature},
          {"text", echoed(e, "text", {{"format", {{"type", "text"}}}})},
          {"tool_choice", echoed(e, "tool_choice", "auto")},
          {"tools", echoed(e, "tools", json::array())},
          {"top_p", head_.top_p},
          {"truncation", echoed(e, "truncation", "disabled")},
          {"usage", usage},
          {"user", echoed(e, "user", nullptr)},
          {"metadata", echoed(e, "metadata", json::object())}};
}

json ResponseOutput::event(const char* type, json fields) {
  json e = {{"type", type}};
  for (auto& [k, v] : fields.items()) e[k] = std::move(v);
  e["sequence_number"] = sequence_++;
  return e;
}

std::vector<json> ResponseOutput::start() {
  std::vector<json> out;
  out.push_back(event("response.created", {{"response", object("in_progress")}}));
  out.push_back(event("response.in_progress", {{"response", object("in_progress")}}));
  return out;
}

void ResponseOutput::open(Item kind, json item, std::vector<json>& out) {
  close("completed", out);
  open_ = kind;
  items_.push_back(std::move(item));
  const size_t index = items_.size() - 1;
  out.push_back(event("response.output_item.added", {{"output_index", index}, {"item", items_.back()}}));
  if (kind == Item::call) return;
  json part = text_part(kind == Item::message ? "output_text" : "reasoning_text");
  items_.back()["content"].push_back(part);
  out.push_back(event("response.content_part.added",
                      {{"item_id", items_.back()["id"]}, {"output_index", index}, {"content_index", 0}, {"part", part}}));
}

void ResponseOutput::append(const std::string& text, std::vector<json>& out) {
  json& item = items_.back();
  const size_t index = items_.size() - 1;
  if (open_ == Item::call) {
    item["arguments"].get_ref<std::string&>() += text;
    out.push_back(event("response.function_call_arguments.delta", {{"item_id", item["id"]}, {"output_index", index}, {"delta", text}}));
    return;
  }
  item["content"][0]["text"].get_ref<std::string&>() += text;
  json fields = {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"delta", text}};
  if (open_ == Item::message) fields["logprobs"] = json::array();
  out.push_back(event(open_ == Item::message ? "response.output_text.delta" : "response.reasoning_text.delta", std::move(fields)));
}

void ResponseOutput::close(const char* status, std::vector<json>& out) {
  if (open_ == Item::none) return;
  json& item = items_.back();
  const size_t index = items_.size() - 1;
  item["status"] = status;
  if (open_ == Item::call) {
    out.push_back(event("response.function_call_arguments.done",
                        {{"item_id", item["id"]}, {"output_index", index}, {"arguments", item["arguments"]}}));
  } else {
    const json& part = item["content"][0];
    json fields = {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"text", part["text"]}};
    if (open_ == Item::message) fields["logprobs"] = json::array();
    out.push_back(event(open_ == Item::message ? "response.output_text.done" : "response.reasoning_text.done", std::move(fields)));
    out.push_back(
        event("response.content_part.done", {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"part", part}}));
  }
  out.push_back(event("response.output_item.done", {{"output_index", index}, {"item", item}}));
  open_ = Item::none;
}

std::vector<json> ResponseOutput::delta(const ChoiceDelta& d) {
  std::vector<json> out;
  // Within one delta reasoning precedes content, and content precedes the calls.
  if (!d.reasoning.empty()) {
    if (open_ != Item::reasoning)
      open(Item::reasoning,
           {{"id", object_id("rs_")},
            {"type", "reasoning"},
            {"status", "in_progress"},
            {"summary", json::array()},
            {"content", json::array()}},
           out);
    append(d.reasoning, out);
  }
  if (!d.content.empty()) {
    if (open_ != Item::message)
      open(Item::message,
           {{"id", object_id("msg_")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"}, {"content", json::array()}},
           out);
    append(d.content, out);
  }
  for (const ToolCallDelta& t : d.tool_calls) {
    if (!t.name.empty()) {
      open(Item::call,
           {{"id", object_id("fc_")},
            {"type", "function_call"},
            {"status", "in_progress"},
            {"arguments", ""},
            {"call_id", t.id},
            {"name", t.name}},
           out);
      tool_call_ = t.index;
    }
    if (open_ == Item::call && t.index == tool_call_ && !t.arguments.empty()) append(t.arguments, out);
  }
  if (!d.finish_reason) return out;
  const bool cut = *d.finish_reason == "length";
  close(cut ? "incomplete" : "completed", out);
  output_tokens_ = d.completion_tokens;
  final_ = object(cut ? "incomplete" : "completed");
  out.push_back(event(cut ? "response.incomplete" : "response.completed", {{"response", final_}}));
  return out;
}

std::vector<json> ResponseOutput::fail(const std::string& message) {
  std::vector<json> out;
  close("incomplete", out);
  final_ = object("failed");
  final_["error"] = {{"code", "server_error"}, {"message", message}};
  out.push_back(event("response.failed", {{"response", final_}}));
  return out;
}

json ResponseOutput::assistant_message() const {
  std::string content, reasoning;
  json calls = json::array();
  for (const json& item : items_) {
    if (item["type"] == "function_call") {
      calls.push_back(
          {{"id", item["call_id"]}, {"type", "function"}, {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
      continue;
    }
    std::string& text = item["type"] == "reasoning" ? reasoning : content;
    if (!text.empty()) text += "\n";
    text += item["content"][0]["text"].get<std::string>();
  }
  json m = {{"role", "assistant"}, {"content", content}};
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  return m;
}

}  // namespace sanctum::server

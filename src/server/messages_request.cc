#include "server/messages_request.h"

#include <string_view>

#include "server/request_fields.h"

namespace sanctum::server {
namespace {

using json = RequestJson;
using Kind = FieldRule::Kind;

constexpr size_t kMaxStopSequences = 16;

const std::vector<FieldRule> kMessagesFields = {
    {"model", Kind::implemented, ""},
    {"max_tokens", Kind::implemented, ""},
    {"messages", Kind::implemented, ""},
    {"system", Kind::implemented, ""},
    {"stop_sequences", Kind::implemented, ""},
    {"stream", Kind::implemented, ""},
    {"temperature", Kind::implemented, ""},
    {"top_p", Kind::implemented, ""},
    {"top_k", Kind::implemented, ""},
    {"tools", Kind::implemented, ""},
    {"tool_choice", Kind::implemented, ""},
    {"thinking", Kind::implemented, ""},
    {"metadata", Kind::harmless, "{\"user_id\": ...} only: an end-user id for abuse monitoring; it never changes the output"},
    {"service_tier", Kind::harmless, "\"auto\" or \"standard_only\" only: one tier here"},
    {"cache_control", Kind::harmless, "a prompt-caching hint: the prefix cache here needs none, and it never changes the output"},
    {"inference_geo", Kind::harmless, "a data-residency choice: this server runs where it runs, and the output is the same"},
    {"speed", Kind::harmless, "\"standard\" only: one speed here"},
    {"user_profile_id", Kind::harmless, "a billing identity; it never changes the output"},
    {"workspace_id", Kind::harmless, "a billing identity; it never changes the output"},
    {"container", Kind::refused, "code-execution containers are not supported"},
    {"context_management", Kind::refused, "server-side context editing is not supported"},
    {"mcp_servers", Kind::refused, "MCP servers are not supported; define the tools in 'tools'"},
    {"output_config", Kind::refused, "output effort and output formats are not supported"},
    {"diagnostics", Kind::refused, "prompt-cache diagnostics are not reported"},
};

bool value_is_harmless(const std::string& field, const json& v) {
  if (field == "metadata") {
    if (!v.is_object()) return false;
    for (const auto& [k, x] : v.items())
      if (k != "user_id" || !(x.is_string() || x.is_null())) return false;
    return true;
  }
  if (field == "service_tier") return v == "auto" || v == "standard_only";
  if (field == "speed") return v == "standard";
  if (field == "cache_control") return v.is_object();
  return v.is_string();  // inference_geo, user_profile_id, workspace_id
}

// POST /v1/messages/count_tokens takes the prompt's fields only.
const std::vector<FieldRule> kCountTokensFields = {
    {"model", Kind::implemented, ""},
    {"messages", Kind::implemented, ""},
    {"system", Kind::implemented, ""},
    {"tools", Kind::implemented, ""},
    {"tool_choice", Kind::implemented, ""},
    {"thinking", Kind::implemented, ""},
    {"cache_control", Kind::harmless, "a prompt-caching hint; it never changes the count"},
    {"mcp_servers", Kind::refused, "MCP servers are not supported; define the tools in 'tools'"},
};

void check_fields(const json& body) {
  check_request_fields(body, kMessagesFields, "/v1/messages", [](const FieldRule& rule, const std::string& field, const json& value) {
    return rule.kind == Kind::harmless && value_is_harmless(field, value);
  });
}

// Text of a text block; other block types are the caller's.
const std::string& block_text(const json& block, const std::string& where) { return require_string(block, "text", where + ".text"); }

[[noreturn]] void unsupported_block(const std::string& type, const std::string& where) {
  if (type == "image") throw bad_request("image blocks are accepted in user messages only", where + ".type", "unsupported_content");
  if (type == "document" || type == "search_result")
    throw bad_request("'" + type + "' content is not supported by this server yet; send text blocks", where + ".type",
                      "unsupported_content");
  throw bad_request("unsupported content block type '" + type + "' here", where + ".type");
}

const std::string& block_type(const json& block, const std::string& where) {
  if (!block.is_object()) throw bad_request("each content block must be an object", where);
  return require_string(block, "type", where + ".type");
}

// Text parts joined the chat path's way: one string.
std::string joined(const json& parts) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) s += "\n";
    s += parts[i]["text"].get<std::string>();
  }
  return s;
}

// A tool_result's content (a string or text blocks) as one string; "Error: " before a failed call's
// text, since the chat templates have no field for it.
std::string tool_result_text(const json& block, const std::string& where) {
  const bool is_error = optional_bool(block, "is_error", false, where + ".is_error");
  std::string text;
  if (is_given(block, "content")) {
    const json& c = block["content"];
    if (c.is_string()) {
      text = c.get<std::string>();
    } else if (c.is_array()) {
      json parts = json::array();
      for (size_t k = 0; k < c.size(); ++k) {
        const std::string at = where + ".content" + index_suffix(k);
        const std::string& type = block_type(c[k], at);
        if (type != "text") unsupported_block(type, at);
        parts.push_back({{"type", "text"}, {"text", block_text(c[k], at)}});
      }
      text = joined(parts);
    } else {
      throw bad_request("a tool_result's 'content' must be a string or an array of text blocks", where + ".content");
    }
  }
  return is_error ? "Error: " + text : text;
}

// An image block as the chat path's image part: {"type": "base64", "media_type", "data"} becomes a
// data: URL, {"type": "url", "url"} passes its URL (remote ones meet --allow-image-urls there).
json image_block(const json& block, const std::string& at) {
  if (!is_given(block, "source") || !block["source"].is_object())
    throw bad_request("an image block needs a 'source' object", at + ".source");
  const json& s = block["source"];
  const std::string& kind = require_string(s, "type", at + ".source.type");
  std::string url;
  if (kind == "base64") {
    const std::string& media = require_string(s, "media_type", at + ".source.media_type");
    url = "data:" + media + ";base64," + require_string(s, "data", at + ".source.data");
  } else if (kind == "url") {
    url = require_string(s, "url", at + ".source.url");
  } else {
    throw bad_request("an image source must be of type \"base64\" or \"url\"", at + ".source.type");
  }
  return {{"type", "image_url"}, {"image_url", {{"url", std::move(url)}}}};
}

void add_user_turn(ChatTranslation& t, const json& content, const std::string& where) {
  if (content.is_string()) return t.add_message({{"role", "user"}, {"content", content}}, where);
  json text = json::array();
  bool has_image = false;
  // Text alone joins into one string (the chat path's way); with images the parts stay as they are.
  auto flush_text = [&] {
    if (text.empty()) return;
    t.add_message({{"role", "user"}, {"content", has_image ? text : json(joined(text))}}, where);
    text = json::array();
    has_image = false;
  };
  for (size_t k = 0; k < content.size(); ++k) {
    const std::string at = where + ".content" + index_suffix(k);
    const std::string& type = block_type(content[k], at);
    if (type == "text") {
      text.push_back({{"type", "text"}, {"text", block_text(content[k], at)}});
    } else if (type == "image") {
      text.push_back(image_block(content[k], at));
      has_image = true;
    } else if (type == "tool_result") {
      flush_text();
      const std::string& id = require_string(content[k], "tool_use_id", at + ".tool_use_id");
      t.add_message({{"role", "tool"}, {"tool_call_id", id}, {"content", tool_result_text(content[k], at)}}, at);
    } else {
      unsupported_block(type, at);
    }
  }
  flush_text();
}

void add_assistant_turn(ChatTranslation& t, const json& content, const std::string& where) {
  if (content.is_string()) return t.add_message({{"role", "assistant"}, {"content", content}}, where);
  std::string text, thinking;
  json calls = json::array();
  for (size_t k = 0; k < content.size(); ++k) {
    const std::string at = where + ".content" + index_suffix(k);
    const json& block = content[k];
    const std::string& type = block_type(block, at);
    if (type == "text") {
      if (!text.empty()) text += "\n";
      text += block_text(block, at);
    } else if (type == "thinking") {
      if (!thinking.empty()) thinking += "\n";
      thinking += require_string(block, "thinking", at + ".thinking");
    } else if (type == "tool_use") {
      const std::string& id = require_string(block, "id", at + ".id");
      const std::string& name = require_string(block, "name", at + ".name");
      if (!is_given(block, "input") || !block["input"].is_object())
        throw bad_request("a tool_use block needs an 'input' object", at + ".input");
      calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", block["input"]}}}});
    } else if (type == "redacted_thinking") {
      throw bad_request("redacted_thinking blocks cannot be read by this server; leave them out", at + ".type", "unsupported_content");
    } else {
      unsupported_block(type, at);
    }
  }
  json m = {{"role", "assistant"}, {"content", text}};
  if (!thinking.empty()) m["reasoning_content"] = thinking;
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  t.add_message(std::move(m), where);
}

void translate_system(ChatTranslation& t, const json& body) {
  if (!is_given(body, "system")) return;
  const json& s = body["system"];
  std::string text;
  if (s.is_string()) {
    text = s.get<std::string>();
  } else if (s.is_array()) {
    json parts = json::array();
    for (size_t k = 0; k < s.size(); ++k) {
      const std::string at = "system" + index_suffix(k);
      if (block_type(s[k], at) != "text") throw bad_request("'system' blocks must be text blocks", at + ".type");
      parts.push_back({{"type", "text"}, {"text", block_text(s[k], at)}});
    }
    text = joined(parts);
  } else {
    throw bad_request("'system' must be a string or an array of text blocks", "system");
  }
  if (!text.empty()) t.add_message({{"role", "system"}, {"content", text}}, "system");
}

void translate_messages(ChatTranslation& t, const json& body) {
  const json& messages = require_array(body, "messages", "messages");
  if (messages.empty()) throw bad_request("'messages' must contain at least one message", "messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages" + index_suffix(i);
    const json& m = messages[i];
    if (!m.is_object()) throw bad_request("each message must be an object", where);
    const std::string& role = require_string(m, "role", where + ".role");
    if (!is_given(m, "content")) throw bad_request("each message needs 'content'", where + ".content");
    const json& content = m["content"];
    if (!content.is_string() && !content.is_array())
      throw bad_request("'content' must be a string or an array of content blocks", where + ".content");
    if (role == "user") add_user_turn(t, content, where);
    else if (role == "assistant") add_assistant_turn(t, content, where);
    else throw bad_request("'role' must be \"user\" or \"assistant\" (the system prompt goes in 'system')", where + ".role");
  }
}

json translate_tool(const json& tool, size_t i) {
  const std::string where = "tools" + index_suffix(i);
  if (!tool.is_object()) throw bad_request("each tool must be an object", where);
  if (is_given(tool, "type") && tool["type"] != "custom")
    throw bad_request("server tools ('" + (tool["type"].is_string() ? tool["type"].get<std::string>() : type_name(tool["type"])) +
                          "') are not supported; define a client tool with 'name', 'description' and 'input_schema'",
                      where + ".type", "unsupported_parameter");
  json f = json::object();
  for (const auto& [key, v] : tool.items()) {
    if (v.is_null() || key == "type" || key == "cache_control") continue;
    if (key == "name") f["name"] = v;
    else if (key == "description") f["description"] = v;
    else if (key == "input_schema") f["parameters"] = v;
    else if (key == "strict") f["strict"] = v;
    else
      throw bad_request("'" + key + "' is not a tool field this server implements; remove it", where + "." + key, "unsupported_parameter");
  }
  if (!f.contains("name")) throw bad_request("a tool needs a 'name'", where + ".name");
  if (!f.contains("parameters")) throw bad_request("a tool needs an 'input_schema'", where + ".input_schema");
  return {{"type", "function"}, {"function", f}};
}

void translate_tools(ChatTranslation& t, const json& body) {
  if (is_given(body, "tools")) {
    const json& tools = require_array(body, "tools", "tools");
    json out = json::array();
    for (size_t i = 0; i < tools.size(); ++i) out.push_back(translate_tool(tools[i], i));
    t.body["tools"] = std::move(out);
  }
  if (!is_given(body, "tool_choice")) return;
  const json& c = body["tool_choice"];
  if (!c.is_object()) throw bad_request("'tool_choice' must be an object with a 'type'", "tool_choice");
  const std::string& type = require_string(c, "type", "tool_choice.type");
  if (type == "auto") t.body["tool_choice"] = "auto";
  else if (type == "any") t.body["tool_choice"] = "required";
  else if (type == "none") t.body["tool_choice"] = "none";
  else if (type == "tool")
    t.body["tool_choice"] = {{"type", "function"}, {"function", {{"name", require_string(c, "name", "tool_choice.name")}}}};
  else throw bad_request("'tool_choice.type' must be \"auto\", \"any\", \"tool\" or \"none\"", "tool_choice.type");
  if (optional_bool(c, "disable_parallel_tool_use", false, "tool_choice.disable_parallel_tool_use")) t.body["parallel_tool_calls"] = false;
}

void translate_thinking(MessagesRequest& r, const json& body) {
  if (!is_given(body, "thinking")) return;
  const json& th = body["thinking"];
  if (!th.is_object()) throw bad_request("'thinking' must be an object with a 'type'", "thinking");
  const std::string& type = require_string(th, "type", "thinking.type");
  if (type == "enabled") r.thinking = MessagesRequest::Thinking::enabled;
  else if (type == "disabled") r.thinking = MessagesRequest::Thinking::disabled;
  else if (type != "adaptive")
    throw bad_request("'thinking.type' must be \"enabled\", \"disabled\" or \"adaptive\"", "thinking.type", "unsupported_parameter");
  // The budget is accepted and checked for shape; max_tokens bounds thinking and answer together.
  if (is_given(th, "budget_tokens") && (!th["budget_tokens"].is_number_integer() || th["budget_tokens"].get<int64_t>() < 1))
    throw bad_request("'thinking.budget_tokens' must be a positive integer", "thinking.budget_tokens");
  if (is_given(th, "display")) {
    if (th["display"] == "omitted") r.show_thinking = false;
    else if (th["display"] != "summarized")
      throw bad_request("'thinking.display' must be \"summarized\" or \"omitted\"", "thinking.display");
  }
  if (r.thinking != MessagesRequest::Thinking::template_default)
    r.chat.body["chat_template_kwargs"] = {{"enable_thinking", r.thinking == MessagesRequest::Thinking::enabled}};
}

}  // namespace

MessagesRequest translate_count_tokens_request(const json& body) {
  check_request_fields(body, kCountTokensFields, "/v1/messages/count_tokens",
                       [](const FieldRule& rule, const std::string& field, const json& value) {
                         return rule.kind == Kind::harmless && value_is_harmless(field, value);
                       });
  json as_message = body;
  as_message["max_tokens"] = 1;  // required by the generation request, irrelevant to the prompt
  return translate_messages_request(as_message);
}

MessagesRequest translate_messages_request(const json& body) {
  check_fields(body);
  MessagesRequest r;
  ChatTranslation& t = r.chat;
  t.fields = {{"stop", "stop_sequences"},
              {"chat_template_kwargs", "thinking"},
              {"parallel_tool_calls", "tool_choice.disable_parallel_tool_use"}};
  t.tool_fields = {{"parameters", "input_schema"}};
  // Both are required by Anthropic's API: a client written for it always sends them.
  t.body["model"] = require_string(body, "model", "model");
  if (!is_given(body, "max_tokens")) throw bad_request("'max_tokens' is required", "max_tokens");
  for (const char* key : {"max_tokens", "temperature", "top_p", "top_k", "stream"})
    if (is_given(body, key)) t.body[key] = body[key];
  if (is_given(body, "stop_sequences")) {
    const json& stops = require_array(body, "stop_sequences", "stop_sequences");
    if (stops.size() > kMaxStopSequences)
      throw bad_request("'stop_sequences' may hold at most " + std::to_string(kMaxStopSequences) + " strings", "stop_sequences");
    for (const json& s : stops)
      if (!s.is_string()) throw bad_request("'stop_sequences' must be an array of strings", "stop_sequences");
    t.body["stop"] = stops;
  }
  translate_system(t, body);
  translate_messages(t, body);
  translate_tools(t, body);
  translate_thinking(r, body);
  return r;
}

}  // namespace sanctum::server

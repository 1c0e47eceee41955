#include "server/responses_request.h"

#include <string_view>

#include "chat/tools/json_scan.h"
#include "server/request_fields.h"

namespace sanctum::server {
namespace {

using json = RequestJson;
using Kind = FieldRule::Kind;

const std::vector<FieldRule> kResponsesFields = {
    {"model", Kind::implemented, ""},
    {"input", Kind::implemented, ""},
    {"instructions", Kind::implemented, ""},
    {"tools", Kind::implemented, ""},
    {"tool_choice", Kind::implemented, ""},
    {"parallel_tool_calls", Kind::implemented, ""},
    {"max_output_tokens", Kind::implemented, ""},
    {"temperature", Kind::implemented, ""},
    {"top_p", Kind::implemented, ""},
    {"stream", Kind::implemented, ""},
    {"store", Kind::implemented, ""},
    {"previous_response_id", Kind::implemented, ""},
    {"text", Kind::implemented, ""},
    {"reasoning", Kind::implemented, ""},
    {"metadata", Kind::implemented, ""},  // echoed in the response object
    {"user", Kind::harmless, "an end-user id for abuse monitoring; it never changes the output"},
    {"safety_identifier", Kind::harmless, "an end-user id for abuse monitoring; it never changes the output"},
    {"prompt_cache_key", Kind::harmless, "a routing hint for the provider's prompt cache; the prefix cache here needs none"},
    {"prompt_cache_retention", Kind::harmless, "a caching policy: it changes cost and latency, never the output"},
    {"prompt_cache_options", Kind::harmless, "caching breakpoints and lifetime: they change cost and latency, never the output"},
    {"service_tier", Kind::harmless, "\"auto\" or \"default\" only: one tier here"},
    {"truncation", Kind::harmless, "\"disabled\" only: a conversation longer than the context is a 400, never cut"},
    {"stream_options", Kind::harmless, "events are never obfuscated here"},
    {"background", Kind::harmless, "false only: responses are never run in the background"},
    {"include", Kind::harmless, "an empty list only: no extra output data (encrypted reasoning, logprobs, sources) is produced"},
    {"conversation", Kind::refused, "server-side conversations are not supported; chain responses with 'previous_response_id'"},
    {"prompt", Kind::refused, "stored prompt templates are not supported; send 'instructions' and 'input'"},
    {"max_tool_calls", Kind::refused, "built-in tools are not supported"},
    {"top_logprobs", Kind::refused, "log probabilities are not returned by /v1/responses; use /v1/chat/completions"},
    {"context_management", Kind::refused, "server-side context compaction is not supported"},
    {"moderation", Kind::refused, "this server runs no moderation"},
    {"image", Kind::refused, "image generation is not supported"},
    {"access_programs", Kind::refused, "access programs are not supported"},
};

bool value_is_harmless(const std::string& field, const json& v) {
  if (field == "user" || field == "safety_identifier" || field == "prompt_cache_key") return v.is_string();
  if (field == "prompt_cache_retention") return v == "in_memory" || v == "24h";
  if (field == "prompt_cache_options" || field == "stream_options") return v.is_object();
  if (field == "service_tier") return v == "auto" || v == "default";
  if (field == "truncation") return v == "disabled";
  if (field == "background") return v == false;
  if (field == "include") return v.is_array() && v.empty();
  return false;
}

void check_fields(const json& body) {
  check_request_fields(body, kResponsesFields, "/v1/responses", [](const FieldRule& rule, const std::string& field, const json& value) {
    return rule.kind == Kind::harmless && value_is_harmless(field, value);
  });
}

// Message content: a string, or text parts joined by newlines.
std::string content_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_request("'content' must be a string or an array of content parts", where);
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const std::string at = where + index_suffix(k);
    const json& part = content[k];
    if (!part.is_object()) throw bad_request("each content part must be an object", at);
    const std::string& type = require_string(part, "type", at + ".type");
    const std::string* piece;
    if (type == "input_text" || type == "output_text") piece = &require_string(part, "text", at + ".text");
    else if (type == "refusal") piece = &require_string(part, "refusal", at + ".refusal");
    else if (type == "input_image")
      throw bad_request("image parts are accepted in user messages only", at + ".type", "unsupported_content");
    else if (type == "input_file" || type == "input_audio")
      throw bad_request("'" + type + "' content is not supported by this server yet; send text parts", at + ".type", "unsupported_content");
    else throw bad_request("unsupported content part type '" + type + "'", at + ".type");
    if (k) text += "\n";
    text += *piece;
  }
  return text;
}

// A user or system message's content: content_text's string, or, when it holds input_image parts,
// the chat path's parts ({"type": "text"} and {"type": "image_url"}), `detail` passed on.
json message_content(const json& content, const std::string& where) {
  bool has_image = false;
  if (content.is_array())
    for (const json& part : content) has_image |= part.is_object() && part.contains("type") && part["type"] == "input_image";
  if (!has_image) return content_text(content, where);
  json parts = json::array();
  for (size_t k = 0; k < content.size(); ++k) {
    const std::string at = where + index_suffix(k);
    const json& part = content[k];
    const std::string& type = require_string(part, "type", at + ".type");
    if (type == "input_text") {
      parts.push_back({{"type", "text"}, {"text", require_string(part, "text", at + ".text")}});
      continue;
    }
    if (type != "input_image")
      throw bad_request("a message with images takes input_text and input_image parts, not '" + type + "'", at + ".type");
    if (is_given(part, "file_id")) throw bad_request("images by 'file_id' are not supported; send 'image_url'", at + ".file_id");
    json image = {{"url", require_string(part, "image_url", at + ".image_url")}};
    if (is_given(part, "detail")) image["detail"] = part["detail"];
    parts.push_back({{"type", "image_url"}, {"image_url", std::move(image)}});
  }
  return parts;
}

// Builds the conversation from input items; consecutive assistant output (text, calls, the
// reasoning before them) is one assistant turn, as a chat client would send it.
class InputTranslator {
 public:
  InputTranslator(ChatTranslation& t, json& conversation) : t_(t), conversation_(conversation) {}

  void add(const json& item, const std::string& at) {
    if (!item.is_object()) throw bad_request("each input item must be an object", at);
    const std::string type = is_given(item, "type") ? require_string(item, "type", at + ".type") : "message";
    if (type == "message") return message(item, at);
    if (type == "function_call") return call(item, at);
    if (type == "function_call_output") {
      const std::string& id = require_string(item, "call_id", at + ".call_id");
      if (!is_given(item, "output")) throw bad_request("a function_call_output needs its 'output'", at + ".output");
      return push({{"role", "tool"}, {"tool_call_id", id}, {"content", content_text(item["output"], at + ".output")}}, at, false);
    }
    if (type == "reasoning") return reasoning(item, at);
    if (type == "item_reference")
      throw bad_request("item references are not supported; send the items themselves or chain with 'previous_response_id'", at + ".type",
                        "unsupported_parameter");
    throw bad_request("input items of type '" + type + "' are not supported", at + ".type", "unsupported_parameter");
  }

  // The input's turns, appended to the conversation once all are read (assistant turns grow as items arrive).
  void finish() {
    const json& all = t_.body["messages"];
    for (size_t k = all.size() - added_; k < all.size(); ++k) conversation_.push_back(all[k]);
  }

 private:
  void message(const json& item, const std::string& at) {
    const std::string& role = require_string(item, "role", at + ".role");
    if (role != "user" && role != "assistant" && role != "system" && role != "developer")
      throw bad_request("'role' must be \"user\", \"assistant\", \"system\" or \"developer\"", at + ".role");
    if (!is_given(item, "content")) throw bad_request("a message needs 'content'", at + ".content");
    if (role != "assistant") return push({{"role", role}, {"content", message_content(item["content"], at + ".content")}}, at, false);
    std::string text = content_text(item["content"], at + ".content");
    json& turn = assistant_turn(at);
    std::string& content = turn["content"].get_ref<std::string&>();
    content += content.empty() ? text : "\n" + text;
  }

  void call(const json& item, const std::string& at) {
    const std::string& arguments = require_string(item, "arguments", at + ".arguments");
    if (!trim_json_space(arguments).empty() && !parse_json_lenient(arguments).is_object())
      throw bad_request("'arguments' must be a JSON object encoded as a string", at + ".arguments");
    json c = {{"id", require_string(item, "call_id", at + ".call_id")},
              {"type", "function"},
              {"function", {{"name", require_string(item, "name", at + ".name")}, {"arguments", arguments}}}};
    json& turn = assistant_turn(at);
    if (!turn.contains("tool_calls")) turn["tool_calls"] = json::array();
    turn["tool_calls"].push_back(std::move(c));
  }

  void reasoning(const json& item, const std::string& at) {
    // The reasoning text (what this server returns), else its summary; encrypted content is never ours.
    for (const char* key : {"content", "summary"}) {
      if (!is_given(item, key)) continue;
      const json& parts = require_array(item, key, at + "." + key);
      for (size_t k = 0; k < parts.size(); ++k) {
        const std::string where = at + "." + key + index_suffix(k);
        if (!parts[k].is_object()) throw bad_request("each reasoning part must be an object", where);
        if (!pending_reasoning_.empty()) pending_reasoning_ += "\n";
        pending_reasoning_ += require_string(parts[k], "text", where + ".text");
      }
      if (!parts.empty()) return;
    }
  }

  // The assistant turn that output items join: the last message if this input opened it, else a new one.
  json& assistant_turn(const std::string& at) {
    if (!open_assistant_) push({{"role", "assistant"}, {"content", ""}}, at, true);
    return t_.body["messages"].back();
  }

  void push(json m, const std::string& at, bool assistant) {
    if (assistant && !pending_reasoning_.empty()) {
      m["reasoning_content"] = pending_reasoning_;
      pending_reasoning_.clear();
    }
    open_assistant_ = assistant;
    t_.add_message(std::move(m), at);
    ++added_;
  }

  ChatTranslation& t_;
  json& conversation_;
  std::string pending_reasoning_;
  bool open_assistant_ = false;
  size_t added_ = 0;
};

void translate_input(ChatTranslation& t, json& conversation, const json& body) {
  if (!is_given(body, "input")) throw bad_request("'input' is required", "input");
  const json& input = body["input"];
  InputTranslator in(t, conversation);
  if (input.is_string()) {
    in.add({{"role", "user"}, {"content", input}}, "input");
  } else if (input.is_array()) {
    for (size_t i = 0; i < input.size(); ++i) in.add(input[i], "input" + index_suffix(i));
  } else {
    throw bad_request("'input' must be a string or an array of input items", "input");
  }
  in.finish();
}

json translate_tool(const json& tool, size_t i) {
  const std::string where = "tools" + index_suffix(i);
  if (!tool.is_object()) throw bad_request("each tool must be an object", where);
  const std::string& type = require_string(tool, "type", where + ".type");
  if (type != "function")
    throw bad_request("tools of type '" + type + "' are not supported; define function tools", where + ".type", "unsupported_parameter");
  json f = json::object();
  for (const auto& [key, v] : tool.items()) {
    if (v.is_null() || key == "type") continue;
    if (key == "name" || key == "description" || key == "parameters" || key == "strict") f[key] = v;
    else
      throw bad_request("'" + key + "' is not a tool field this server implements; remove it", where + "." + key, "unsupported_parameter");
  }
  if (!f.contains("name")) throw bad_request("a function tool needs a 'name'", where + ".name");
  return {{"type", "function"}, {"function", f}};
}

void translate_tools(ChatTranslation& t, const json& body) {
  if (is_given(body, "tools")) {
    const json& tools = require_array(body, "tools", "tools");
    json out = json::array();
    for (size_t i = 0; i < tools.size(); ++i) out.push_back(translate_tool(tools[i], i));
    t.body["tools"] = std::move(out);
  }
  if (is_given(body, "tool_choice")) {
    const json& c = body["tool_choice"];
    if (c.is_string()) {
      t.body["tool_choice"] = c;  // "auto" | "none" | "required"; the chat path checks the value
    } else if (c.is_object() && c.value("type", json()) == "function") {
      t.body["tool_choice"] = {{"type", "function"}, {"function", {{"name", require_string(c, "name", "tool_choice.name")}}}};
    } else {
      throw bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}", "tool_choice",
                        "unsupported_parameter");
    }
  }
  if (is_given(body, "parallel_tool_calls")) t.body["parallel_tool_calls"] = body["parallel_tool_calls"];
}

// text.format -> response_format; the chat path decides what it supports.
void translate_text(ChatTranslation& t, const json& body) {
  if (!is_given(body, "text")) return;
  const json& text = body["text"];
  if (!text.is_object()) throw bad_request("'text' must be an object", "text");
  for (const auto& [key, v] : text.items()) {
    if (v.is_null()) continue;
    if (key == "verbosity") refuse_field("text.verbosity", "verbosity is not supported");
    if (key != "format")
      throw bad_request("'text." + key + "' is not a field this server implements; remove it", "text." + key, "unsupported_parameter");
  }
  if (!is_given(text, "format")) return;
  const json& f = text["format"];
  if (!f.is_object()) throw bad_request("'text.format' must be an object with a 'type'", "text.format");
  const std::string& type = require_string(f, "type", "text.format.type");
  if (type == "text" || type == "json_object") {
    t.body["response_format"] = {{"type", type}};
  } else if (type == "json_schema") {
    json schema = json::object();
    for (const char* key : {"name", "description", "schema", "strict"})
      if (is_given(f, key)) schema[key] = f[key];
    t.body["response_format"] = {{"type", "json_schema"}, {"json_schema", schema}};
  } else {
    throw bad_request("'text.format.type' must be \"text\", \"json_object\" or \"json_schema\"", "text.format.type");
  }
}

// reasoning.effort turns the template's thinking on or off: "none" and "minimal" off, any other
// effort on. The returned reasoning is the model's own text; no summary is written.
void translate_reasoning(ResponsesRequest& r, const json& body) {
  if (!is_given(body, "reasoning")) return;
  const json& rs = body["reasoning"];
  if (!rs.is_object()) throw bad_request("'reasoning' must be an object", "reasoning");
  for (const auto& [key, v] : rs.items()) {
    if (v.is_null()) continue;
    if (key == "summary" || key == "generate_summary") {
      if (v != "auto" && v != "concise" && v != "detailed")
        throw bad_request("'reasoning." + key + "' must be \"auto\", \"concise\" or \"detailed\"", "reasoning." + key);
    } else if (key != "effort") {
      refuse_field("reasoning." + key, "only 'effort' and 'summary' are read");
    }
  }
  if (!is_given(rs, "effort")) return;
  const json& e = rs["effort"];
  const bool off = e == "none" || e == "minimal";
  if (!off && e != "low" && e != "medium" && e != "high" && e != "xhigh")
    throw bad_request("'reasoning.effort' must be \"none\", \"minimal\", \"low\", \"medium\", \"high\" or \"xhigh\"", "reasoning.effort");
  r.reasoning_on = !off;
  r.chat.body["chat_template_kwargs"] = {{"enable_thinking", !off}};
}

}  // namespace

ResponsesRequest translate_responses_request(const json& body, const ResponseStore& store) {
  check_fields(body);
  ResponsesRequest r;
  ChatTranslation& t = r.chat;
  t.messages_param = "input";
  t.fields = {{"max_tokens", "max_output_tokens"},
              {"response_format.json_schema", "text.format"},  // the schema's fields sit on text.format itself
              {"response_format", "text.format"},
              {"chat_template_kwargs", "reasoning"}};
  if (is_given(body, "model")) t.body["model"] = require_string(body, "model", "model");
  if (is_given(body, "max_output_tokens")) t.body["max_tokens"] = body["max_output_tokens"];
  for (const char* key : {"temperature", "top_p", "stream"})
    if (is_given(body, key)) t.body[key] = body[key];
  r.store = optional_bool(body, "store", true, "store");
  if (is_given(body, "metadata") && !body["metadata"].is_object()) throw bad_request("'metadata' must be an object", "metadata");
  if (is_given(body, "instructions"))
    t.add_message({{"role", "system"}, {"content", require_string(body, "instructions", "instructions")}}, "instructions");
  if (is_given(body, "previous_response_id")) {
    r.previous_response_id = require_string(body, "previous_response_id", "previous_response_id");
    std::optional<json> earlier = store.get(r.previous_response_id);
    if (!earlier)
      throw bad_request(
          "Previous response with id '" + r.previous_response_id +
              "' not found (responses are kept in memory while the server runs, the oldest evicted first, and never with store: false)",
          "previous_response_id", "previous_response_not_found");
    for (json& m : *earlier) {
      t.add_message(m, "previous_response_id");
      r.conversation.push_back(std::move(m));
    }
  }
  translate_input(t, r.conversation, body);
  if (!t.body.contains("messages") || t.body["messages"].empty()) throw bad_request("'input' must hold at least one item", "input");
  translate_tools(t, body);
  translate_text(t, body);
  translate_reasoning(r, body);
  for (const char* key : {"instructions", "max_output_tokens", "metadata", "previous_response_id", "reasoning", "text", "tool_choice",
                          "tools", "parallel_tool_calls", "truncation", "user"})
    if (is_given(body, key)) r.echo[key] = body[key];
  return r;
}

}  // namespace sanctum::server

#include "server/openai_request.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "server/api_error.h"
#include "server/request_fields.h"

namespace sanctum::server {

using json = RequestJson;

std::string type_name(const RequestJson& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

size_t find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned cp;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

namespace {

// Deepest [ / { nesting outside strings; stops counting once past the limit.
int max_depth(std::string_view s) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxJsonDepth) return deepest;
    } else if (c == ']' || c == '}') --depth;
  }
  return deepest;
}

bool given(const json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

bool get_bool(const json& body, const char* key, bool fallback) {
  if (!given(body, key)) return fallback;
  const json& v = body.at(key);
  if (!v.is_boolean()) throw bad_request("'" + std::string(key) + "' must be a boolean, not " + type_name(v), key);
  return v.get<bool>();
}

// Integers may arrive as 3 or 3.0; 3.5 is not an integer.
int64_t get_int(const json& body, const char* key, int64_t lo, int64_t hi) {
  const json& v = body.at(key);
  double d;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw bad_request("'" + std::string(key) + "' is out of range", key);
    int64_t i = v.get<int64_t>();
    if (i < lo || i > hi)
      throw bad_request("'" + std::string(key) + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi), key);
    return i;
  }
  if (!v.is_number_float()) throw bad_request("'" + std::string(key) + "' must be an integer, not " + type_name(v), key);
  d = v.get<double>();
  if (!std::isfinite(d) || std::floor(d) != d) throw bad_request("'" + std::string(key) + "' must be an integer", key);
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
    throw bad_request("'" + std::string(key) + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi), key);
  return static_cast<int64_t>(d);
}

double get_number(const json& body, const char* key, double lo, double hi, bool lo_open = false) {
  const json& v = body.at(key);
  if (!v.is_number()) throw bad_request("'" + std::string(key) + "' must be a number, not " + type_name(v), key);
  double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi || (lo_open && d == lo)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "'%s' must be %s %g and <= %g", key, lo_open ? ">" : ">=", lo, hi);
    throw bad_request(buf, key);
  }
  return d;
}

std::string message_param(size_t i, const char* field = nullptr) {
  std::string p = "messages[" + std::to_string(i) + "]";
  if (field) p += std::string(".") + field;
  return p;
}

// An OpenAI image part: {"type": "image_url", "image_url": {"url", "detail"}} (the URL alone as a
// string too, as vLLM takes it), or the Responses form {"type": "input_image", "image_url": "..."}.
// `detail` is accepted and has no effect: the checkpoint's processor fixes the resolution.
RequestImage image_part(const json& part, const std::string& where) {
  const char* key = part.contains("image_url") ? "image_url" : "url";
  if (!part.contains(key)) throw bad_request("an image part needs 'image_url'", where + ".image_url");
  const json& v = part[key];
  std::string url_param = where + "." + key;
  const json* url = &v;
  if (v.is_object()) {
    if (v.contains("detail") && !v["detail"].is_null()) {
      const json& d = v["detail"];
      if (!d.is_string() || (d != "auto" && d != "low" && d != "high"))
        throw bad_request("'detail' must be \"auto\", \"low\" or \"high\" (it does not change the processing here)", url_param + ".detail");
    }
    if (!v.contains("url")) throw bad_request("'image_url' needs a 'url'", url_param + ".url");
    url = &v["url"];
    url_param += ".url";
  }
  if (!url->is_string()) throw bad_request("the image URL must be a string, not " + type_name(*url), url_param);
  return image_from_url(url->get<std::string>(), where);
}

// Content as one string (a string, or text parts joined by newlines), or, when the message holds
// images, its parts with each image replaced by {"type": "image"} and moved to `images`.
json normalize_content(const json& content, size_t index, std::vector<RequestImage>& images) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array())
    throw bad_request("message content must be a string or an array of content parts", message_param(index, "content"));
  std::string text;
  json parts = json::array();
  bool has_image = false;
  for (size_t k = 0; k < content.size(); ++k) {
    const json& part = content[k];
    std::string where = message_param(index, "content") + "[" + std::to_string(k) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw bad_request("each content part must be an object with a string 'type'", where);
    const std::string type = part["type"].get<std::string>();
    if (type == "text" || type == "input_text") {
      if (!part.contains("text") || !part["text"].is_string())
        throw bad_request("a text content part needs a string 'text'", where + ".text");
      if (!text.empty()) text += "\n";
      text += part["text"].get<std::string>();
      parts.push_back({{"type", "text"}, {"text", part["text"]}});
    } else if (type == "image_url" || type == "input_image") {
      images.push_back(image_part(part, where));
      parts.push_back({{"type", "image"}});
      has_image = true;
    } else {
      throw bad_request("unsupported content part type '" + type + "'", where);
    }
  }
  if (has_image) return parts;
  return text;
}

json parse_messages(const json& body, std::vector<RequestImage>& images) {
  if (!given(body, "messages")) throw bad_request("'messages' is required", "messages");
  const json& messages = body.at("messages");
  if (!messages.is_array()) throw bad_request("'messages' must be an array, not " + type_name(messages), "messages");
  if (messages.empty()) throw bad_request("'messages' must contain at least one message", "messages");
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object()) throw bad_request("each message must be an object", message_param(i));
    if (!m.contains("role") || !m["role"].is_string()) throw bad_request("each message needs a string 'role'", message_param(i, "role"));
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer")
      throw bad_request("unknown role '" + role + "'", message_param(i, "role"));
    json copy = m;
    copy["content"] = normalize_content(m.contains("content") ? m["content"] : json(), i, images);
    if (copy["content"].is_array() && role != "user")
      throw bad_request("images are accepted in user messages only, not in a " + role + " message", message_param(i, "content"));
    const bool has_calls = role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (has_calls) copy["tool_calls"] = normalize_tool_calls(m["tool_calls"], i);
    else copy.erase("tool_calls");  // null or on another role: templates test only for presence
    if (role == "tool") check_tool_result(m, i);
    if (copy["content"].is_null()) {
      if (role != "assistant") throw bad_request("a " + role + " message needs 'content'", message_param(i, "content"));
      // Templates concatenate content: an assistant turn with only tool calls has "" (as in vLLM).
      copy["content"] = "";
    }
    out.push_back(std::move(copy));
  }
  return out;
}

std::vector<std::string> parse_stop(const json& body) {
  std::vector<std::string> out;
  if (!given(body, "stop")) return out;
  const json& v = body.at("stop");
  if (v.is_string()) {
    if (!v.get<std::string>().empty()) out.push_back(v.get<std::string>());
    return out;
  }
  if (!v.is_array()) throw bad_request("'stop' must be a string or an array of strings", "stop");
  if (v.size() > kMaxStopStrings) throw bad_request("'stop' may hold at most " + std::to_string(kMaxStopStrings) + " strings", "stop");
  for (const json& s : v) {
    if (!s.is_string()) throw bad_request("'stop' must be a string or an array of strings", "stop");
    if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
  }
  return out;
}

std::vector<int32_t> parse_id_list(const json& v, const char* param) {
  std::vector<int32_t> ids;
  for (const json& x : v) {
    if (!x.is_number_integer()) throw bad_request(std::string("'") + param + "' must hold integer token ids", param);
    int64_t id = x.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      throw bad_request(std::string("'") + param + "' holds an id out of range", param);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// Fields both endpoints share.
void parse_common(const json& body, OpenAiRequest& r) {
  if (given(body, "model")) {
    if (!body["model"].is_string()) throw bad_request("'model' must be a string", "model");
    r.model = body["model"].get<std::string>();
  }
  const char* max_key = given(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (given(body, max_key)) r.max_tokens = static_cast<int>(get_int(body, max_key, 1, 1 << 24));
  SamplingParams& s = r.sampling;
  if (given(body, "temperature")) s.temperature = static_cast<float>(get_number(body, "temperature", 0, 2));
  if (given(body, "top_p")) s.top_p = static_cast<float>(get_number(body, "top_p", 0, 1, true));
  if (given(body, "top_k")) {
    int64_t k = get_int(body, "top_k", -1, 1 << 24);
    s.top_k = k < 0 ? 0 : static_cast<int>(k);  // -1 means off, as in vLLM
  }
  if (given(body, "min_p")) s.min_p = static_cast<float>(get_number(body, "min_p", 0, 1));
  if (given(body, "repetition_penalty")) s.repetition_penalty = static_cast<float>(get_number(body, "repetition_penalty", 0, 10, true));
  if (given(body, "presence_penalty")) s.presence_penalty = static_cast<float>(get_number(body, "presence_penalty", -2, 2));
  if (given(body, "frequency_penalty")) s.frequency_penalty = static_cast<float>(get_number(body, "frequency_penalty", -2, 2));
  if (given(body, "seed")) {
    s.seed = static_cast<uint64_t>(get_int(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    r.seed_given = true;
  }
  r.stop = parse_stop(body);
  if (given(body, "stop_token_ids")) {
    if (!body["stop_token_ids"].is_array()) throw bad_request("'stop_token_ids' must be an array", "stop_token_ids");
    r.stop_token_ids = parse_id_list(body["stop_token_ids"], "stop_token_ids");
  }
  r.ignore_eos = get_bool(body, "ignore_eos", false);
  r.skip_special_tokens = get_bool(body, "skip_special_tokens", true);
  if (given(body, "n")) r.n = static_cast<int>(get_int(body, "n", 1, kMaxChoices));
  r.stream = get_bool(body, "stream", false);
  if (given(body, "stream_options")) {
    const json& so = body["stream_options"];
    if (!so.is_object()) throw bad_request("'stream_options' must be an object", "stream_options");
    r.include_usage = get_bool(so, "include_usage", false);
  }
  r.format = parse_output_format(body, r.chat);
  r.logit_bias = parse_logit_bias(body);
}

}  // namespace

json parse_body(std::string_view body) {
  if (body.empty()) throw bad_request("The request body is empty; send a JSON object");
  size_t bad = find_invalid_utf8(body);
  if (bad != std::string_view::npos)
    throw bad_request("The request body is not valid UTF-8 (first bad byte at offset " + std::to_string(bad) + ")", "", "invalid_utf8");
  if (max_depth(body) > kMaxJsonDepth) throw bad_request("The request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) throw bad_request("The request body is not valid JSON", "", "invalid_json");
  if (!j.is_object()) throw bad_request("The request body must be a JSON object, not " + type_name(j));
  return j;
}

OpenAiRequest parse_chat_request(const json& body) {
  reject_unsupported_fields(body, true);
  OpenAiRequest r;
  r.chat = true;
  r.messages = parse_messages(body, r.images);
  r.tools = parse_tool_request(body);
  parse_common(body, r);
  r.logprobs = get_bool(body, "logprobs", false);
  if (given(body, "top_logprobs")) {
    r.top_logprobs = static_cast<int>(get_int(body, "top_logprobs", 0, kMaxTopLogprobs));
    if (!r.logprobs && r.top_logprobs > 0) throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  }
  if (given(body, "chat_template_kwargs")) {
    if (!body["chat_template_kwargs"].is_object()) throw bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    r.chat_template_kwargs = body["chat_template_kwargs"];
  }
  if (given(body, "reasoning_effort")) {
    // A template variable (gpt-oss style templates read it), as vLLM passes it.
    if (!body["reasoning_effort"].is_string()) throw bad_request("'reasoning_effort' must be a string", "reasoning_effort");
    r.chat_template_kwargs["reasoning_effort"] = body["reasoning_effort"].get<std::string>();
    r.reasoning_effort = true;
  }
  return r;
}

OpenAiRequest parse_completion_request(const json& body) {
  reject_unsupported_fields(body, false);
  OpenAiRequest r;
  r.chat = false;  // before parse_common: the endpoint decides which format fields exist
  if (!given(body, "prompt")) throw bad_request("'prompt' is required", "prompt");
  json p = body["prompt"];
  // A one-element batch is the same as its element.
  if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())) p = p[0];
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
    if (r.prompt->empty()) throw bad_request("'prompt' must not be empty", "prompt");
  } else if (p.is_array() && !p.empty() && p[0].is_number()) {
    r.prompt_ids = parse_id_list(p, "prompt");
  } else if (p.is_array() && p.size() > 1) {
    throw bad_request("batched prompts are not supported; send one prompt per request", "prompt");
  } else {
    throw bad_request("'prompt' must be a string or an array of token ids", "prompt");
  }
  parse_common(body, r);
  if (given(body, "logprobs")) {
    r.top_logprobs = static_cast<int>(get_int(body, "logprobs", 0, kMaxTopLogprobs));
    r.logprobs = true;
  }
  if (given(body, "echo") && get_bool(body, "echo", false)) throw bad_request("'echo' is not supported", "echo");
  return r;
}

}  // namespace sanctum::server

#pragma once
// Parsing and validation of /v1/chat/completions and /v1/completions bodies. Every problem is an
// ApiError 400 that names the offending parameter, unsupported fields included (server/request_fields.h);
// null means "not given". Bodies keep their key order (the chat template's tojson writes tools and
// call arguments in the order the client sent them, as transformers does). Nothing here touches a
// model: the result is checked against the model (vocab, context) later.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampling/sampler.h"
#include "server/output_request.h"
#include "server/request_images.h"
#include "server/tool_request.h"

namespace sanctum::server {

using RequestJson = nlohmann::ordered_json;

struct OpenAiRequest {
  bool chat = true;
  std::string model;  // empty: the server's default model
  // chat: [{role, content, ...}], call arguments as objects. content is a string (text parts joined by
  // newlines) unless the message holds images: then its parts, text as {"type": "text", "text"} and
  // each image as {"type": "image"}, the form transformers gives a chat template.
  RequestJson messages;
  std::vector<RequestImage> images;   // chat: the images, in the order the messages hold them
  std::optional<std::string> prompt;  // completions: a text prompt ...
  std::vector<int32_t> prompt_ids;    // ... or token ids
  nlohmann::json chat_template_kwargs = nlohmann::json::object();
  ToolRequest tools;              // chat: tools, tool_choice, parallel_tool_calls
  bool reasoning_effort = false;  // chat: `reasoning_effort` was given (it is in chat_template_kwargs)

  std::optional<int> max_tokens;
  SamplingParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;  // stop strings, never emitted
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;
  bool skip_special_tokens = true;
  OutputFormat format;                                // response_format / grammar / json_schema
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id, bias
};

inline constexpr int kMaxChoices = 16;
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr int kMaxJsonDepth = 64;

// Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). Returns the offset of the
// first bad byte, or npos.
size_t find_invalid_utf8(std::string_view text);

// Parses a request body into JSON: invalid UTF-8, nesting past kMaxJsonDepth, malformed JSON and a
// non-object top level are 400s.
RequestJson parse_body(std::string_view body);

OpenAiRequest parse_chat_request(const RequestJson& body);
OpenAiRequest parse_completion_request(const RequestJson& body);

// What a JSON value is, for error messages: "a string", "an array", ...
std::string type_name(const RequestJson& v);

}  // namespace sanctum::server

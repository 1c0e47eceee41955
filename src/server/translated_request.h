#pragma once
// Requests of the other APIs (Anthropic Messages, OpenAI Responses) rewritten as a chat-completions
// body, so that one parser validates and one path serves them all: messages, tools, sampling and the
// limits are the chat path's. An error the chat path raises names a chat field; it is renamed to
// the field the client sent ("stop" -> "stop_sequences", "messages[3]" -> "messages[1].content[2]").
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace sanctum::server {

struct ChatTranslation {
  RequestJson body = RequestJson::object();  // a /v1/chat/completions request
  std::vector<std::string> message_origins;  // body.messages[k] came from this path of the client's request
  std::string messages_param = "messages";   // what the client calls the conversation as a whole
  // Chat field -> the client's field, matched on whole path segments ("stop" renames "stop" only,
  // never "stop_token_ids"). tools[i].function.X becomes tools[i].X, X renamed by `tool_fields`.
  std::vector<std::pair<std::string, std::string>> fields;
  std::vector<std::pair<std::string, std::string>> tool_fields;

  // Appends a chat message and where it came from.
  void add_message(RequestJson message, std::string origin);
  // The client's name for a chat-path parameter.
  std::string client_param(const std::string& chat_param) const;
  ApiError renamed(const ApiError& e) const;
};

// parse_chat_request on the translated body, errors renamed.
OpenAiRequest parse_translated(const ChatTranslation& t);

// Checks for the translated APIs' own fields (the chat path's live in openai_request.cc), each
// throwing a 400 that names `param`.
bool is_given(const RequestJson& obj, std::string_view key);  // present and not null
const std::string& require_string(const RequestJson& obj, std::string_view key, const std::string& param);
const RequestJson& require_array(const RequestJson& obj, std::string_view key, const std::string& param);
bool optional_bool(const RequestJson& obj, std::string_view key, bool fallback, const std::string& param);

// "[i]" (built by appending: gcc 12 misreports `"[" + std::to_string(i)` under -Wrestrict).
std::string index_suffix(size_t i);

// Ids of response objects: prefix + 24 letters and digits, unique within the process.
std::string object_id(std::string_view prefix);

}  // namespace sanctum::server

#pragma once
// The API dialects the router relays. They share the relay (failover, budgets, quality checks) and
// differ in where an answer's text, tool calls and token counts sit, how a stream ends, and how an
// error the router itself raises must look for the client's SDK to read it.
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace sanctum::router {

enum class ApiDialect {
  openai,          // /v1/chat/completions, /v1/completions: choices[], data: [DONE]
  messages,        // /v1/messages (Anthropic): content blocks, message_stop, Anthropic error shape
  responses,       // /v1/responses: output items, response.completed
  tokens,          // /tokenize, /detokenize: no text to judge, never streamed
  message_tokens,  // /v1/messages/count_tokens: the same, with Anthropic's error shape
};

ApiDialect dialect_of_path(std::string_view path);

// An error the router answers with itself (401, 429, 5xx), as a body in the dialect's shape.
std::string dialect_error_body(ApiDialect dialect, const server::ApiError& error);
// The event that cuts a stream the client already reads, in the dialect's shape.
std::string dialect_error_event(ApiDialect dialect, const std::string& message, const std::string& code);

}  // namespace sanctum::router

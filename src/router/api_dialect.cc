#include "router/api_dialect.h"

#include <nlohmann/json.hpp>

#include "server/messages_response.h"

namespace sanctum::router {

using nlohmann::json;

ApiDialect dialect_of_path(std::string_view path) {
  if (path == "/v1/messages") return ApiDialect::messages;
  if (path == "/v1/responses") return ApiDialect::responses;
  if (path == "/tokenize" || path == "/detokenize") return ApiDialect::tokens;
  if (path == "/v1/messages/count_tokens") return ApiDialect::message_tokens;
  return ApiDialect::openai;
}

std::string dialect_error_body(ApiDialect dialect, const server::ApiError& error) {
  if (dialect == ApiDialect::messages || dialect == ApiDialect::message_tokens)
    return server::anthropic_error_json(error).dump(-1, ' ', false, json::error_handler_t::replace);
  return error_body(error);
}

std::string dialect_error_event(ApiDialect dialect, const std::string& message, const std::string& code) {
  switch (dialect) {
    case ApiDialect::messages:
      return "event: error\ndata: " + json{{"type", "error"}, {"error", {{"type", "api_error"}, {"message", message}}}}.dump() + "\n\n";
    case ApiDialect::responses:
      return "event: error\ndata: " + json{{"type", "error"}, {"code", code}, {"message", message}, {"param", nullptr}}.dump() + "\n\n";
    default:
      return "data: " + json{{"error", {{"message", message}, {"type", "upstream_error"}, {"param", nullptr}, {"code", code}}}}.dump() +
             "\n\n";
  }
}

}  // namespace sanctum::router

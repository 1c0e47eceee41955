#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace sanctum::server {

ApiError bad_request(const std::string& message, const std::string& param, const std::string& code) {
  return ApiError(400, "invalid_request_error", message, param, code);
}

ApiError not_found(const std::string& message, const std::string& code) {
  return ApiError(404, "invalid_request_error", message, "", code);
}

ApiError model_not_found(const std::string& model) {
  return ApiError(404, "invalid_request_error", "The model '" + model + "' does not exist", "model", "model_not_found");
}

ApiError method_not_allowed(const std::string& method, const std::string& path) {
  return ApiError(405, "invalid_request_error", "Method " + method + " is not allowed on " + path, "", "method_not_allowed");
}

ApiError payload_too_large(size_t limit) {
  return ApiError(413, "invalid_request_error", "Request body exceeds the limit of " + std::to_string(limit) + " bytes", "",
                  "request_too_large");
}

ApiError queue_full(const std::string& model) {
  return ApiError(429, "rate_limit_error", "The request queue for model '" + model + "' is full; retry shortly", "", "queue_full");
}

ApiError unavailable(const std::string& message, const std::string& code) {
  return ApiError(503, "service_unavailable_error", message, "", code);
}

ApiError internal_error(const std::string& request_id) {
  return ApiError(500, "server_error", "Internal server error (request " + request_id + ")", "", "internal_error");
}

std::string error_body(const ApiError& error) {
  nlohmann::json e = {{"message", error.what()},
                      {"type", error.type()},
                      {"param", error.param().empty() ? nlohmann::json() : nlohmann::json(error.param())},
                      {"code", error.code().empty() ? nlohmann::json() : nlohmann::json(error.code())}};
  return nlohmann::json{{"error", e}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace sanctum::server

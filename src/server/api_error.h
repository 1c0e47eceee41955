#pragma once
// Request-path failures as OpenAI error objects: {"error":{"message","type","param","code"}} with
// the HTTP status that goes with them. Handlers throw ApiError; the HTTP layer turns it into a body.
#include <stdexcept>
#include <string>

namespace sanctum::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(std::move(message)), status_(status), type_(std::move(type)), param_(std::move(param)), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // empty: null
  const std::string& code() const { return code_; }    // empty: null

 private:
  int status_;
  std::string type_, param_, code_;
};

// The usual ones.
ApiError bad_request(const std::string& message, const std::string& param = "", const std::string& code = "");
ApiError not_found(const std::string& message, const std::string& code = "not_found");
ApiError model_not_found(const std::string& model);
ApiError method_not_allowed(const std::string& method, const std::string& path);
ApiError payload_too_large(size_t limit);
ApiError queue_full(const std::string& model);
ApiError unavailable(const std::string& message, const std::string& code);
ApiError internal_error(const std::string& request_id);

// {"error": {...}} as compact JSON.
std::string error_body(const ApiError& error);

}  // namespace sanctum::server

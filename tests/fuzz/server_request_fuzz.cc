// Request bodies from the network: parse_body and both request parsers must either accept the
// input or throw ApiError, never crash or throw anything else.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/api_error.h"
#include "server/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    nlohmann::json j = sanctum::server::parse_body(body);
    try {
      sanctum::server::parse_chat_request(j);
    } catch (const sanctum::server::ApiError&) {
    }
    sanctum::server::parse_completion_request(j);
  } catch (const sanctum::server::ApiError&) {
  }
  return 0;
}

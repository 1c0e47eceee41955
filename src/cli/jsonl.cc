#include "cli/jsonl.h"

#include <cstdio>
#include <iostream>
#include <string>

#include "base/error.h"

namespace sanctum::cli {

int for_each_jsonl_line(const std::function<nlohmann::ordered_json(const nlohmann::ordered_json&)>& handle) {
  int status = 0;
  std::string line;
  while (std::getline(std::cin, line)) {
    nlohmann::ordered_json result;
    try {
      result = handle(nlohmann::ordered_json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      result = {{"error", std::string("malformed JSON line: ") + e.what()}};
      status = 1;
    } catch (const Error& e) {
      result = {{"error", e.what()}};
      status = 1;
    }
    const std::string s = result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(s.data(), 1, s.size(), stdout);
  }
  return status;
}

}  // namespace sanctum::cli

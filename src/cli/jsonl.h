#pragma once
// The --jsonl convention of tokenize / detokenize: one JSON value per stdin line in, one JSON line
// out, so thousands of cases run in one process.
#include <functional>

#include <nlohmann/json.hpp>

namespace sanctum::cli {

// Calls `handle` on each stdin line parsed as JSON and prints its result as one line. A line that is
// not JSON, or whose handler throws sanctum::Error, prints {"error": "..."} instead and makes the
// return value 1; later lines still run.
int for_each_jsonl_line(const std::function<nlohmann::ordered_json(const nlohmann::ordered_json&)>& handle);

}  // namespace sanctum::cli

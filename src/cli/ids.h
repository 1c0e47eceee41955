#pragma once
// Comma-separated token id lists, as `generate --prompt-ids` reads and prints them.
#include <cstdint>
#include <string>
#include <vector>

namespace sanctum::cli {

// "1,2, 3" → {1, 2, 3}. Throws Error(invalid_argument) naming the bad item.
std::vector<int32_t> parse_ids(const std::string& text);
std::string format_ids(const std::vector<int32_t>& ids);

}  // namespace sanctum::cli

#include "cli/ids.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "base/error.h"

namespace sanctum::cli {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t b = item.find_first_not_of(" \t\n"), e = item.find_last_not_of(" \t\n");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    check(!item.empty() && end && *end == '\0' && errno == 0 && v >= 0 && v <= INT32_MAX, ErrorKind::invalid_argument,
          "token id '" + item + "' is not a non-negative integer");
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

std::string format_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

}  // namespace sanctum::cli

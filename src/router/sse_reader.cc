#include "router/sse_reader.h"

namespace sanctum::router {

bool SseSplitter::feed(std::string_view bytes, std::vector<std::string>& out) {
  buffer_.append(bytes);
  size_t start = 0;
  // Resume scanning a little before the old end: a terminator may straddle two reads.
  size_t i = scanned_ > 3 ? scanned_ - 3 : 0;
  while (i < buffer_.size()) {
    size_t end = std::string::npos;
    if (buffer_[i] == '\n') {
      if (i + 1 < buffer_.size() && buffer_[i + 1] == '\n') end = i + 2;
      else if (i + 2 < buffer_.size() && buffer_[i + 1] == '\r' && buffer_[i + 2] == '\n') end = i + 3;
    }
    if (end == std::string::npos) {
      ++i;
      continue;
    }
    out.emplace_back(buffer_, start, end - start);
    start = end;
    i = end;
  }
  buffer_.erase(0, start);
  scanned_ = buffer_.size();
  return buffer_.size() <= max_event_bytes_;
}

std::string sse_data(std::string_view event) {
  std::string data;
  bool first = true;
  size_t pos = 0;
  while (pos < event.size()) {
    size_t nl = event.find('\n', pos);
    std::string_view line = event.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? event.size() : nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.rfind("data:", 0) != 0) continue;
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (!first) data += '\n';
    data.append(line);
    first = false;
  }
  return data;
}

}  // namespace sanctum::router

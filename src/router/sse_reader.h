#pragma once
// Splits an upstream's SSE body into whole events as bytes arrive (an event ends at a blank line,
// "\n\n" or "\r\n\r\n"), so the router forwards whole events only and can look at each one before
// the client sees it. What an event says is answer_reader.h.
#include <string>
#include <string_view>
#include <vector>

namespace sanctum::router {

class SseSplitter {
 public:
  explicit SseSplitter(size_t max_event_bytes = 1u << 20) : max_event_bytes_(max_event_bytes) {}
  // Appends bytes; complete events (each with its terminating blank line) are appended to `out`.
  // Returns false when an event grows past the limit (the upstream is not speaking SSE).
  bool feed(std::string_view bytes, std::vector<std::string>& out);
  // Bytes of an unfinished event still held.
  size_t pending() const { return buffer_.size(); }

 private:
  size_t max_event_bytes_;
  std::string buffer_;
  size_t scanned_ = 0;
};

// The joined data lines of one event (comments and other fields ignored).
std::string sse_data(std::string_view event);

}  // namespace sanctum::router

#pragma once
// Splits an upstream's SSE body into whole events as bytes arrive (an event ends at a blank line,
// "\n\n" or "\r\n\r\n"), so the router forwards whole events only and can look at each one before
// the client sees it. Also pulls out what the quality checks and budgets need from an OpenAI
// stream: the text of choice 0, usage, an error event and the [DONE] marker.
#include <cstdint>
#include <optional>
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

struct SseEventInfo {
  bool done = false;          // data: [DONE]
  bool error = false;         // the data is an object with "error"
  bool parse_failed = false;  // data that is not JSON
  std::string text;           // choice 0's delta.content / text / reasoning_content
  bool has_tool_call = false;
  std::optional<int64_t> total_tokens;  // usage.total_tokens when present
  std::string error_message;
};

// The joined data lines of one event (comments and other fields ignored), parsed.
SseEventInfo inspect_sse_event(std::string_view event);

// What a non-streamed completion body says (choices[*].message.content or .text).
struct CompletionInfo {
  bool parsed = false;
  std::string text;   // all choices' text, joined (for the detectors)
  bool empty = true;  // no choice carries text, reasoning or tool calls
  std::optional<int64_t> total_tokens;
};
CompletionInfo inspect_completion_body(std::string_view body);

}  // namespace sanctum::router

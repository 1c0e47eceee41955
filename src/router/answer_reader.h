#pragma once
// What an upstream's answer says, in each API dialect the router relays: the text the quality
// checks read (choice 0 / the first content), whether it holds tool calls, the tokens it cost (for
// budgets), an error, and the end of a stream ([DONE], message_stop, response.completed).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "router/api_dialect.h"

namespace sanctum::router {

struct SseEventInfo {
  bool done = false;          // the stream's last event: [DONE], message_stop, response.completed / incomplete / failed
  bool error = false;         // an error event (or a failed response)
  bool parse_failed = false;  // data that is not JSON
  std::string text;           // choice 0's delta.content / text / reasoning_content, or a text / thinking delta
  bool has_tool_call = false;
  std::optional<int64_t> total_tokens;  // usage.total_tokens (or prompt + completion) when present
  // Messages streams carry the two counts in different events: message_start has the input,
  // message_delta the output so far.
  std::optional<int64_t> input_tokens, output_tokens;
  std::string error_message;
};

// One SSE event (data lines joined and parsed).
SseEventInfo inspect_sse_event(std::string_view event, ApiDialect dialect = ApiDialect::openai);

// What a non-streamed answer body says.
struct CompletionInfo {
  bool parsed = false;  // a JSON object
  std::string text;     // all choices' / content blocks' / output items' text, joined (for the detectors)
  bool empty = true;    // no text, reasoning or tool calls anywhere (never set for the tokens dialect)
  std::optional<int64_t> total_tokens;
};
CompletionInfo inspect_completion_body(std::string_view body, ApiDialect dialect = ApiDialect::openai);

}  // namespace sanctum::router

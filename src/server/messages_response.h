#pragma once
// Anthropic Messages response shapes: the whole message; a streamed one as the SSE events the
// anthropic SDK reads (message_start, then per content block content_block_start, its deltas and
// content_block_stop, one ping after the first block opens, then message_delta with the stop reason
// and usage, and message_stop); and errors, {"type": "error", "error": {"type", "message"}}.
// Blocks come in the order the model wrote them: thinking, text, tool_use.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/openai_response.h"
#include "server/text_sink.h"

namespace sanctum::server {

// One server-sent event with an `event:` line.
struct SseEvent {
  std::string name;
  nlohmann::ordered_json data;  // keys in the order the API documents them
};
std::string sse_frame(const SseEvent& event);  // "event: NAME\ndata: JSON\n\n"

struct MessageMeta {
  std::string id;  // msg_...
  std::string model;
  int input_tokens = 0;
  bool show_thinking = true;  // false: thinking blocks come back with empty text
};

// "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" for a chat finish_reason.
std::string stop_reason(const ChoiceText& choice);

nlohmann::ordered_json message_json(const MessageMeta& meta, const ChoiceText& choice);

// The events of one streamed message, fed the chat path's deltas of its one choice.
class MessageEvents {
 public:
  explicit MessageEvents(MessageMeta meta) : meta_(std::move(meta)) {}
  std::vector<SseEvent> start() const;  // message_start
  // The delta's blocks; on the choice's last delta also message_delta and message_stop.
  std::vector<SseEvent> delta(const ChoiceDelta& d);

 private:
  enum class Block { none, thinking, text, tool_use };
  void open(Block kind, nlohmann::ordered_json content_block, std::vector<SseEvent>& out);
  void close(std::vector<SseEvent>& out);
  void block_delta(nlohmann::ordered_json delta, std::vector<SseEvent>& out) const;

  MessageMeta meta_;
  Block open_ = Block::none;
  int index_ = -1;      // the open block's index in the message
  int tool_call_ = -1;  // the chat path's index of the call the open tool_use block holds
  bool pinged_ = false;
};

// Anthropic's error type for an HTTP status ("invalid_request_error", "not_found_error", ...).
std::string anthropic_error_type(int status);
nlohmann::ordered_json anthropic_error_json(const ApiError& error);

}  // namespace sanctum::server

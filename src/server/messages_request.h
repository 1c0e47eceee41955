#pragma once
// POST /v1/messages (Anthropic's Messages API) as a chat-completions request. `system` becomes the
// first message; content blocks become chat messages as vLLM shapes them: text blocks join, an
// assistant's `tool_use` blocks become its `tool_calls` and its `thinking` blocks its
// `reasoning_content`, each `tool_result` block a `role: "tool"` message. Tools, tool_choice,
// stop_sequences and thinking map to their chat equivalents; every other field is implemented,
// harmless, or a 400 that names it.
#include <string>

#include "server/translated_request.h"

namespace sanctum::server {

struct MessagesRequest {
  ChatTranslation chat;
  enum class Thinking { template_default, enabled, disabled } thinking = Thinking::template_default;
  bool show_thinking = true;  // thinking.display "omitted": thinking blocks come back empty
};

MessagesRequest translate_messages_request(const RequestJson& body);
// The body of POST /v1/messages/count_tokens: the same prompt fields, no generation fields.
MessagesRequest translate_count_tokens_request(const RequestJson& body);

}  // namespace sanctum::server

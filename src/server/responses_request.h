#pragma once
// POST /v1/responses (OpenAI's Responses API) as a chat-completions request. `instructions` becomes
// the system message; `input` items become chat messages (message items by role, `function_call`
// items an assistant turn's `tool_calls`, `function_call_output` items `role: "tool"` messages,
// `reasoning` items the next assistant turn's `reasoning_content`); `previous_response_id` puts the
// stored conversation before them. Flat function tools, tool_choice, text.format and reasoning map
// to their chat equivalents; every other field is implemented, harmless, or a 400 that names it.
#include <string>

#include "server/response_store.h"
#include "server/translated_request.h"

namespace sanctum::server {

struct ResponsesRequest {
  ChatTranslation chat;
  RequestJson conversation = RequestJson::array();  // stored conversation + input, without instructions
  std::string previous_response_id;
  bool store = true;
  bool reasoning_on = false;  // reasoning.effort asks for thinking: the model must be able to think
  // The request fields a response object repeats (instructions, tools, tool_choice, ...), as sent.
  RequestJson echo = RequestJson::object();
};

// Throws 400 previous_response_not_found for an id `store` does not hold.
ResponsesRequest translate_responses_request(const RequestJson& body, const ResponseStore& store);

}  // namespace sanctum::server

#pragma once
// Request -> prompt token ids through the model's PromptBuilder (chat/prompt_builder.h): the chat
// template for /v1/chat/completions, the raw prompt for /v1/completions. Checks the ids against the
// vocabulary so a bad prompt is a 400, never a fault later.
#include <cstdint>

#include "chat/prompt_builder.h"
#include "server/openai_request.h"

namespace sanctum::server {

BuiltPrompt request_prompt(const PromptBuilder& builder, const OpenAiRequest& request, int64_t vocab_size);

}  // namespace sanctum::server

#pragma once
// Request -> prompt token ids: the chat template for /v1/chat/completions, the raw prompt for
// /v1/completions. Checks the ids against the model so a bad prompt is a 400, never a fault later.
#include <cstdint>
#include <string>
#include <vector>

#include "server/app.h"
#include "server/openai_request.h"

namespace sanctum::server {

struct BuiltPrompt {
  std::vector<int32_t> ids;
  bool start_in_reasoning = false;  // the rendered prompt already opened a <think> block
};

// The chat prompt as text (exposed for tests).
std::string render_chat(const ServedModel& model, const nlohmann::json& messages, const nlohmann::json& kwargs);

BuiltPrompt build_prompt(const ServedModel& model, const OpenAiRequest& request);

}  // namespace sanctum::server

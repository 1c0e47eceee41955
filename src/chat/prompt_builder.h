#pragma once
// Chat messages -> the token ids a model is fed. `sanctum serve` and `sanctum generate --chat` both
// build prompts here, so one conversation renders to the same ids in both: the checkpoint's chat
// template (ChatML when it has none), its BOS/EOS strings, the generation prompt, special-token text
// parsed, and whether the rendered prompt already opened a <think> block.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace sanctum {

class Tokenizer;

struct BuiltPrompt {
  std::vector<int32_t> ids;
  bool start_in_reasoning = false;  // the rendered prompt ends inside an opened <think> block
};

class PromptBuilder {
 public:
  // Parses the tokenizer's chat template once (throws Error(invalid_input) naming the template line
  // on a syntax error). The tokenizer must outlive the builder.
  explicit PromptBuilder(const Tokenizer& tokenizer);

  const Tokenizer& tokenizer() const { return *tokenizer_; }

  // The template writes <think> blocks and the vocabulary has "</think>": the output can be split
  // into reasoning and content (chat/reasoning_splitter.h).
  bool thinking() const { return thinking_; }

  // messages: [{"role", "content" (a string), ...}] with assistant `tool_calls` arguments as
  // objects; template_kwargs: extra template variables (enable_thinking, ...); tools: the OpenAI
  // `tools` array the template's `tools` variable holds, null for none. Keys keep their order.
  // Without the generation prompt the ids end with the last message (a client counting a
  // conversation's tokens, POST /tokenize).
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::json& template_kwargs,
                     const nlohmann::ordered_json& tools = nullptr, bool add_generation_prompt = true) const;
  BuiltPrompt chat(const nlohmann::ordered_json& messages, const nlohmann::json& template_kwargs,
                   const nlohmann::ordered_json& tools = nullptr, bool add_generation_prompt = true) const;

 private:
  const Tokenizer* tokenizer_;
  ChatTemplate template_;
  bool thinking_;
};

// A raw completion prompt (/v1/completions, `sanctum generate --prompt`): BOS/EOS as the
// tokenizer's post-processor adds them, special-token text parsed. It needs no chat template.
std::vector<int32_t> text_prompt(const Tokenizer& tokenizer, std::string_view prompt);

// The one-turn conversation of `sanctum generate --chat TEXT`.
nlohmann::json user_turn(std::string_view text);

}  // namespace sanctum

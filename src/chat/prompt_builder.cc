#include "chat/prompt_builder.h"

#include "tokenizer/tokenizer.h"

namespace sanctum {
namespace {

constexpr std::string_view kThinkOpen = "<think>";

// Templates that start the answer in reasoning end the generation prompt with "<think>\n".
bool ends_inside_think(std::string_view text) {
  const size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return false;
  return text.substr(0, end + 1).ends_with(kThinkOpen);
}

}  // namespace

PromptBuilder::PromptBuilder(const Tokenizer& tokenizer)
    : tokenizer_(&tokenizer), template_(tokenizer.chat_template()),
      thinking_(tokenizer.chat_template().find(kThinkOpen) != std::string::npos && tokenizer.token_to_id("</think>") >= 0) {}

std::string PromptBuilder::render(const nlohmann::ordered_json& messages, const nlohmann::json& template_kwargs,
                                  const nlohmann::ordered_json& tools, bool add_generation_prompt) const {
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  for (auto it = template_kwargs.begin(); it != template_kwargs.end(); ++it) options.extra[it.key()] = it.value();
  options.bos_token = tokenizer_->bos_token();
  options.eos_token = tokenizer_->eos_token();
  options.tools = tools;
  return template_.render(messages, options);
}

BuiltPrompt PromptBuilder::chat(const nlohmann::ordered_json& messages, const nlohmann::json& template_kwargs,
                                const nlohmann::ordered_json& tools, bool add_generation_prompt) const {
  const std::string rendered = render(messages, template_kwargs, tools, add_generation_prompt);
  BuiltPrompt p;
  p.start_in_reasoning = thinking_ && ends_inside_think(rendered);
  // The template wrote the special tokens (BOS included) as text: parse them, add none.
  p.ids = tokenizer_->encode(rendered, /*add_special_tokens=*/false, /*parse_special=*/true);
  return p;
}

std::vector<int32_t> text_prompt(const Tokenizer& tokenizer, std::string_view prompt) {
  return tokenizer.encode(prompt, /*add_special_tokens=*/true, /*parse_special=*/true);
}

nlohmann::json user_turn(std::string_view text) { return nlohmann::json::array({{{"role", "user"}, {"content", std::string(text)}}}); }

}  // namespace sanctum

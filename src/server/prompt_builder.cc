#include "server/prompt_builder.h"

#include "base/error.h"
#include "server/api_error.h"

namespace sanctum::server {

using nlohmann::json;

std::string render_chat(const ServedModel& model, const json& messages, const json& kwargs) {
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) options.extra[it.key()] = it.value();
  options.bos_token = model.tokenizer->bos_token();
  options.eos_token = model.tokenizer->eos_token();
  return model.chat_template->render(nlohmann::ordered_json(messages), options);
}

namespace {
bool ends_inside_think(const std::string& text) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return false;
  const std::string tag = "<think>";
  return end + 1 >= tag.size() && text.compare(end + 1 - tag.size(), tag.size(), tag) == 0;
}
}  // namespace

BuiltPrompt build_prompt(const ServedModel& model, const OpenAiRequest& r) {
  BuiltPrompt p;
  const char* param = r.chat ? "messages" : "prompt";
  try {
    if (r.chat) {
      std::string text = render_chat(model, r.messages, r.chat_template_kwargs);
      p.start_in_reasoning = model.thinking && ends_inside_think(text);
      p.ids = model.tokenizer->encode(text, /*add_special_tokens=*/false, /*parse_special=*/true);
    } else if (r.prompt) {
      p.ids = model.tokenizer->encode(*r.prompt, /*add_special_tokens=*/true, /*parse_special=*/true);
    } else {
      p.ids = r.prompt_ids;
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::internal) throw;
    throw bad_request(std::string("could not build the prompt: ") + e.what(), param);
  }
  if (p.ids.empty()) throw bad_request("the prompt is empty after tokenization", param);
  const int64_t vocab = model.worker->model().vocab_size();
  for (int32_t id : p.ids)
    if (id < 0 || id >= vocab)
      throw bad_request("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")", param);
  return p;
}

}  // namespace sanctum::server

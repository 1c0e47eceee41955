#include "server/request_prompt.h"

#include <string>

#include "base/error.h"
#include "server/api_error.h"

namespace sanctum::server {

BuiltPrompt request_prompt(const PromptBuilder& builder, const OpenAiRequest& r, int64_t vocab_size) {
  BuiltPrompt p;
  const char* param = r.chat ? "messages" : "prompt";
  try {
    if (r.chat) p = builder.chat(r.messages, r.chat_template_kwargs, r.tools.offered());
    else if (r.prompt) p.ids = text_prompt(builder.tokenizer(), *r.prompt);
    else p.ids = r.prompt_ids;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::internal) throw;
    throw bad_request(std::string("could not build the prompt: ") + e.what(), param);
  }
  if (p.ids.empty()) throw bad_request("the prompt is empty after tokenization", param);
  for (int32_t id : p.ids)
    if (id < 0 || id >= vocab_size)
      throw bad_request("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")", param);
  return p;
}

}  // namespace sanctum::server

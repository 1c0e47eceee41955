#include "server/request_prompt.h"

#include <string>

#include "base/error.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::server {

namespace {

// The placeholder the Qwen-VL family's templates write once per image.
constexpr const char* kImagePad = "<|image_pad|>";

}  // namespace

void prepare_prompt_images(const PromptBuilder& builder, const OpenAiRequest& r, PromptImages* images) {
  if (!images || !images->processor)
    throw bad_request("model '" + (images ? images->model_id : std::string()) +
                          "' does not accept images (it has no vision tower); send text only, or name a vision model",
                      r.images.front().param, "unsupported_content");
  if (builder.tokenizer().token_to_id(kImagePad) < 0)
    throw bad_request(std::string("model '") + images->model_id + "' has no " + kImagePad + " token for images", r.images.front().param,
                      "unsupported_content");
  images->prepared = prepare_request_images(r.images, *images->options, *images->processor, nullptr);
}

std::vector<int32_t> expand_prompt_images(const PromptBuilder& builder, const std::vector<int32_t>& ids, const PromptImages& images) {
  return expand_image_placeholders(ids, builder.tokenizer().token_to_id(kImagePad), images.prepared);
}

BuiltPrompt request_prompt(const PromptBuilder& builder, const OpenAiRequest& r, int64_t vocab_size, PromptImages* images) {
  BuiltPrompt p;
  const char* param = r.chat ? "messages" : "prompt";
  if (!r.images.empty()) prepare_prompt_images(builder, r, images);
  try {
    if (r.chat) p = builder.chat(r.messages, r.chat_template_kwargs, r.tools.offered());
    else if (r.prompt) p.ids = text_prompt(builder.tokenizer(), *r.prompt);
    else p.ids = r.prompt_ids;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::internal) throw;
    throw bad_request(std::string("could not build the prompt: ") + e.what(), param);
  }
  if (!r.images.empty()) p.ids = expand_prompt_images(builder, p.ids, *images);
  if (p.ids.empty()) throw bad_request("the prompt is empty after tokenization", param);
  for (int32_t id : p.ids)
    if (id < 0 || id >= vocab_size)
      throw bad_request("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")", param);
  return p;
}

}  // namespace sanctum::server

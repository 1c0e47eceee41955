#pragma once
// Request -> prompt token ids through the model's PromptBuilder (chat/prompt_builder.h): the chat
// template for /v1/chat/completions, the raw prompt for /v1/completions. Checks the ids against the
// vocabulary so a bad prompt is a 400, never a fault later.
#include <cstdint>
#include <string>
#include <vector>

#include "chat/prompt_builder.h"
#include "image/prepared_image.h"
#include "image/processor_config.h"
#include "server/openai_request.h"
#include "server/request_images.h"

namespace sanctum::server {

// What a request's images need from the model and the server, and what comes back.
struct PromptImages {
  std::string model_id;                               // for the "does not accept images" error
  const image::ProcessorConfig* processor = nullptr;  // null: the model has no vision tower
  const ImageOptions* options = nullptr;
  std::vector<image::PreparedImage> prepared;  // out: one per request image, in prompt order
};

// With images, the model must take them (else a 400 naming it); each is prepared with its processor
// and its <|image_pad|> expanded to its token count in the returned ids.
// The two image steps on their own (POST /tokenize counts a conversation with images the same way).
void prepare_prompt_images(const PromptBuilder& builder, const OpenAiRequest& request, PromptImages* images);
std::vector<int32_t> expand_prompt_images(const PromptBuilder& builder, const std::vector<int32_t>& ids, const PromptImages& images);

BuiltPrompt request_prompt(const PromptBuilder& builder, const OpenAiRequest& request, int64_t vocab_size, PromptImages* images = nullptr);

}  // namespace sanctum::server

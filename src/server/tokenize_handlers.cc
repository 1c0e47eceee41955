// POST /tokenize and /detokenize, in vLLM's shape with llama.cpp's field names accepted too: a
// client counts a prompt's tokens, or a conversation's as the chat template renders it, with the
// model's own tokenizer. Text is tokenized with special-token text parsed, as prompts are.
#include <cstdint>
#include <limits>

#include "base/error.h"
#include "server/app.h"
#include "server/request_prompt.h"
#include "server/translated_request.h"

namespace sanctum::server {

namespace {

using json = RequestJson;

void check_fields(const json& body, std::initializer_list<std::string_view> allowed, const char* route) {
  for (const auto& [field, value] : body.items()) {
    if (value.is_null()) continue;
    bool known = false;
    for (std::string_view a : allowed) known = known || a == field;
    if (!known)
      throw bad_request("'" + field + "' is not a field this server implements for " + route + "; remove it", field,
                        "unsupported_parameter");
  }
}

}  // namespace

void App::tokenize(Exchange& ex) {
  const json body = parse_body(ex.request().body);
  check_fields(body,
               {"model", "prompt", "content", "messages", "add_special_tokens", "add_special", "add_generation_prompt",
                "chat_template_kwargs", "tools", "return_token_strs"},
               "/tokenize");
  const int sources = is_given(body, "prompt") + is_given(body, "content") + is_given(body, "messages");
  if (sources != 1) throw bad_request("send exactly one of 'prompt' (or 'content', as llama.cpp names it) and 'messages'", "prompt");
  if (is_given(body, "add_special_tokens") && is_given(body, "add_special"))
    throw bad_request("send 'add_special_tokens' or its llama.cpp name 'add_special', not both", "add_special");
  const bool chat = is_given(body, "messages");
  for (const char* key : {"add_generation_prompt", "chat_template_kwargs", "tools"})
    if (!chat && is_given(body, key)) throw bad_request(std::string("'") + key + "' needs 'messages'", key);
  // Defaults as in vLLM (a prompt gets the tokenizer's BOS/EOS, a rendered chat none: the template
  // wrote them) and llama.cpp (`content` gets none).
  const char* special_key = is_given(body, "add_special") ? "add_special" : "add_special_tokens";
  const bool add_special = optional_bool(body, special_key, is_given(body, "prompt"), special_key);
  std::string model;
  if (is_given(body, "model")) model = require_string(body, "model", "model");
  ServedModel& m = resolve_model(model);
  ex.model = m.id;

  std::vector<int32_t> ids;
  if (chat) {
    json chat_body = {{"messages", body["messages"]}};
    for (const char* key : {"tools", "chat_template_kwargs"})
      if (is_given(body, key)) chat_body[key] = body[key];
    const OpenAiRequest r = parse_chat_request(chat_body);
    PromptImages images{m.id, m.processor ? &*m.processor : nullptr, &options_.images, {}};
    if (!r.images.empty()) prepare_prompt_images(*m.prompts, r, &images);
    const bool generation_prompt = optional_bool(body, "add_generation_prompt", true, "add_generation_prompt");
    try {
      const std::string text = m.prompts->render(r.messages, r.chat_template_kwargs, r.tools.offered(), generation_prompt);
      ids = m.tokenizer->encode(text, add_special, /*parse_special=*/true);
      if (!r.images.empty()) ids = expand_prompt_images(*m.prompts, ids, images);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::internal) throw;
      throw bad_request(std::string("could not render the conversation: ") + e.what(), "messages");
    }
  } else {
    const char* key = is_given(body, "prompt") ? "prompt" : "content";
    ids = m.tokenizer->encode(require_string(body, key, key), add_special, /*parse_special=*/true);
  }
  ex.prompt_tokens = static_cast<int>(ids.size());
  nlohmann::json out = {{"count", ids.size()}, {"max_model_len", m.context_length}, {"tokens", ids}};
  if (optional_bool(body, "return_token_strs", false, "return_token_strs")) {
    nlohmann::json strs = nlohmann::json::array();
    for (int32_t id : ids) strs.push_back(m.tokenizer->id_to_token(id).value_or(""));
    out["token_strs"] = std::move(strs);
  }
  ex.respond_json(200, out);
}

void App::detokenize(Exchange& ex) {
  const json body = parse_body(ex.request().body);
  check_fields(body, {"model", "tokens"}, "/detokenize");
  const json& tokens = require_array(body, "tokens", "tokens");
  std::string model;
  if (is_given(body, "model")) model = require_string(body, "model", "model");
  ServedModel& m = resolve_model(model);
  ex.model = m.id;
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const json& t = tokens[i];
    const bool in_range = t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() <= std::numeric_limits<int32_t>::max();
    if (!in_range || !m.tokenizer->id_to_token(static_cast<int32_t>(t.get<int64_t>())))
      throw bad_request("tokens" + index_suffix(i) + " is not a token id of model '" + m.id + "' (its tokenizer has ids 0 to " +
                            std::to_string(m.tokenizer->vocab_size() - 1) + ")",
                        "tokens");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  const std::string text = m.tokenizer->decode(ids, /*skip_special_tokens=*/false);
  // `prompt` is vLLM's name, `content` llama.cpp's.
  ex.respond_json(200, {{"prompt", text}, {"content", text}});
}

}  // namespace sanctum::server

#pragma once
// OpenAI response shapes: chat.completion, chat.completion.chunk, text_completion (whole and
// streamed), usage and logprobs.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/text_sink.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::server {

struct ResponseMeta {
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;
  std::string model;
  std::string system_fingerprint;
  bool chat = true;
};

// One choice accumulated for a non-streamed response.
struct ChoiceText {
  std::string content, reasoning;
  std::vector<TokenOutput> logprobs;
  std::string finish_reason = "stop";
  int completion_tokens = 0;
};

nlohmann::json usage_json(int prompt_tokens, int completion_tokens);

// chat: {"content": [{token, logprob, bytes, top_logprobs}]}; completions: {tokens, token_logprobs, top_logprobs, text_offset}.
// text_offset counts characters, as OpenAI's does (a client slices the text with it), from `text_offset`.
nlohmann::json logprobs_json(const Tokenizer& tok, const std::vector<TokenOutput>& tokens, bool chat, size_t text_offset = 0);

nlohmann::json full_response(const ResponseMeta& meta, const std::vector<ChoiceText>& choices, int prompt_tokens, bool want_logprobs,
                             const Tokenizer& tok);

// A stream chunk for one choice; `role` only on the first chat chunk.
nlohmann::json chunk_json(const ResponseMeta& meta, int index, const std::string* role, const std::string& content,
                          const std::string& reasoning, const nlohmann::json& logprobs, const std::optional<std::string>& finish_reason);
// The include_usage chunk: empty choices, usage set.
nlohmann::json usage_chunk(const ResponseMeta& meta, int prompt_tokens, int completion_tokens);

std::string dump(const nlohmann::json& j);

// Characters (code points) in UTF-8 text.
size_t utf8_chars(std::string_view text);

}  // namespace sanctum::server

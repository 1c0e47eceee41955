#pragma once
// OpenAI response shapes: chat.completion, chat.completion.chunk, text_completion (whole and
// streamed), usage, logprobs and tool calls (content is null when a message holds only calls).
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
struct ToolCallText {
  std::string id, name, arguments;
};

struct ChoiceText {
  std::string content, reasoning;
  std::vector<ToolCallText> tool_calls;
  std::vector<TokenOutput> logprobs;
  std::string finish_reason = "stop";
  std::string stop_string;  // the stop string that ended it, if one did
  int completion_tokens = 0;
};

// Adds one delta of a choice to the whole choice.
void accumulate(ChoiceText& choice, const ChoiceDelta& delta);

nlohmann::json usage_json(int prompt_tokens, int completion_tokens);

// chat: {"content": [{token, logprob, bytes, top_logprobs}]}; completions: {tokens, token_logprobs, top_logprobs, text_offset}.
// text_offset counts characters, as OpenAI's does (a client slices the text with it), from `text_offset`.
nlohmann::json logprobs_json(const Tokenizer& tok, const std::vector<TokenOutput>& tokens, bool chat, size_t text_offset = 0);

nlohmann::json full_response(const ResponseMeta& meta, const std::vector<ChoiceText>& choices, int prompt_tokens, bool want_logprobs,
                             const Tokenizer& tok);

// Folds a delta's tool-call pieces into a choice's whole calls.
void add_tool_call_pieces(std::vector<ToolCallText>& calls, const std::vector<ToolCallDelta>& pieces);

// A stream chunk for one choice; `role` only on the first chat chunk. Tool-call pieces become
// delta.tool_calls: index, id, type and name on a call's first piece, then arguments fragments.
nlohmann::json chunk_json(const ResponseMeta& meta, int index, const std::string* role, const std::string& content,
                          const std::string& reasoning, const nlohmann::json& logprobs, const std::optional<std::string>& finish_reason,
                          const std::vector<ToolCallDelta>& tool_calls = {});
// The chunks one streamed delta becomes: its text, reasoning, tool calls and logprobs (if any),
// then, on a choice's last delta, the chunk with finish_reason (completions fold it into the text
// chunk when there is one).
std::vector<nlohmann::json> delta_chunks(const ResponseMeta& meta, const ChoiceDelta& delta, const nlohmann::json& logprobs);

// The include_usage chunk: empty choices, usage set.
nlohmann::json usage_chunk(const ResponseMeta& meta, int prompt_tokens, int completion_tokens);

std::string dump(const nlohmann::json& j);

// Characters (code points) in UTF-8 text.
size_t utf8_chars(std::string_view text);

}  // namespace sanctum::server

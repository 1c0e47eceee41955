#include "server/openai_response.h"

namespace sanctum::server {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

size_t utf8_chars(std::string_view text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;  // continuation bytes extend a character
  return n;
}

json usage_json(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}, {"total_tokens", prompt_tokens + completion_tokens}};
}

namespace {
json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}
std::string token_text(const Tokenizer& tok, int32_t id) {
  const int32_t one[1] = {id};
  return tok.decode(one, false);
}
std::string token_raw(const Tokenizer& tok, int32_t id) {
  const int32_t one[1] = {id};
  return tok.decode_raw(one, false);
}
}  // namespace

json logprobs_json(const Tokenizer& tok, const std::vector<TokenOutput>& tokens, bool chat, size_t text_offset) {
  if (chat) {
    json content = json::array();
    for (const TokenOutput& t : tokens) {
      json top = json::array();
      for (const auto& [id, lp] : t.top)
        top.push_back({{"token", token_text(tok, id)}, {"logprob", lp}, {"bytes", bytes_of(token_raw(tok, id))}});
      content.push_back({{"token", token_text(tok, t.token)},
                         {"logprob", t.logprob},
                         {"bytes", bytes_of(token_raw(tok, t.token))},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = text_offset;
  for (const TokenOutput& t : tokens) {
    std::string text = token_text(tok, t.token);
    toks.push_back(text);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[token_text(tok, id)] = lp;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += utf8_chars(text);
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json full_response(const ResponseMeta& meta, const std::vector<ChoiceText>& choices, int prompt_tokens, bool want_logprobs,
                   const Tokenizer& tok) {
  json out_choices = json::array();
  int completion_tokens = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceText& c = choices[i];
    completion_tokens += c.completion_tokens;
    json lp = want_logprobs ? logprobs_json(tok, c.logprobs, meta.chat) : json();
    if (meta.chat) {
      json message = {{"role", "assistant"}, {"content", c.tool_calls.empty() || !c.content.empty() ? json(c.content) : json()}};
      if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
      if (!c.tool_calls.empty()) {
        json calls = json::array();
        for (const ToolCallText& t : c.tool_calls)
          calls.push_back({{"id", t.id}, {"type", "function"}, {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
        message["tool_calls"] = std::move(calls);
      }
      out_choices.push_back({{"index", i}, {"message", message}, {"logprobs", lp}, {"finish_reason", c.finish_reason}});
    } else {
      out_choices.push_back({{"index", i}, {"text", c.content}, {"logprobs", lp}, {"finish_reason", c.finish_reason}});
    }
  }
  return {{"id", meta.id},
          {"object", meta.chat ? "chat.completion" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", meta.system_fingerprint},
          {"choices", out_choices},
          {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

void add_tool_call_pieces(std::vector<ToolCallText>& calls, const std::vector<ToolCallDelta>& pieces) {
  for (const ToolCallDelta& p : pieces) {
    if (static_cast<size_t>(p.index) >= calls.size()) calls.resize(static_cast<size_t>(p.index) + 1);
    ToolCallText& t = calls[static_cast<size_t>(p.index)];
    if (!p.id.empty()) t.id = p.id;
    if (!p.name.empty()) t.name = p.name;
    t.arguments += p.arguments;
  }
}

void accumulate(ChoiceText& c, const ChoiceDelta& d) {
  c.content += d.content;
  c.reasoning += d.reasoning;
  add_tool_call_pieces(c.tool_calls, d.tool_calls);
  c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
  if (d.finish_reason) {
    c.finish_reason = *d.finish_reason;
    c.stop_string = d.stop_string;
    c.completion_tokens = d.completion_tokens;
  }
}

json chunk_json(const ResponseMeta& meta, int index, const std::string* role, const std::string& content, const std::string& reasoning,
                const json& logprobs, const std::optional<std::string>& finish_reason, const std::vector<ToolCallDelta>& tool_calls) {
  json choice;
  if (meta.chat) {
    json delta = json::object();
    if (role) delta["role"] = *role;
    if (!content.empty() || role) delta["content"] = content;
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) {
      json calls = json::array();
      for (const ToolCallDelta& t : tool_calls) {
        json call = {{"index", t.index}};
        if (!t.name.empty()) {
          call["id"] = t.id;
          call["type"] = "function";
          call["function"] = {{"name", t.name}, {"arguments", t.arguments}};
        } else {
          call["function"] = {{"arguments", t.arguments}};
        }
        calls.push_back(std::move(call));
      }
      delta["tool_calls"] = std::move(calls);
    }
    choice = {{"index", index}, {"delta", delta}};
  } else {
    choice = {{"index", index}, {"text", content}};
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason ? json(*finish_reason) : json();
  return {{"id", meta.id},
          {"object", meta.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", meta.system_fingerprint},
          {"choices", json::array({choice})}};
}

std::vector<json> delta_chunks(const ResponseMeta& meta, const ChoiceDelta& d, const json& lp) {
  std::vector<json> out;
  const bool has_body = !d.content.empty() || !d.reasoning.empty() || !lp.is_null() || !d.tool_calls.empty();
  if (has_body)
    out.push_back(chunk_json(meta, d.index, nullptr, d.content, d.reasoning, lp,
                             d.finish_reason && !meta.chat ? d.finish_reason : std::nullopt, d.tool_calls));
  if (d.finish_reason && (meta.chat || !has_body)) out.push_back(chunk_json(meta, d.index, nullptr, "", "", json(), d.finish_reason));
  return out;
}

json usage_chunk(const ResponseMeta& meta, int prompt_tokens, int completion_tokens) {
  return {{"id", meta.id},
          {"object", meta.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", meta.system_fingerprint},
          {"choices", json::array()},
          {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

}  // namespace sanctum::server

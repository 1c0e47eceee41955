#include "server/request_fields.h"

#include <algorithm>
#include <string>

#include "server/api_error.h"

namespace sanctum::server {
namespace {

using Kind = FieldRule::Kind;
using json = nlohmann::ordered_json;

// Shared by both endpoints.
const std::vector<FieldRule> kCommon = {
    {"model", Kind::implemented, ""},
    {"max_tokens", Kind::implemented, ""},
    {"temperature", Kind::implemented, ""},
    {"top_p", Kind::implemented, ""},
    {"n", Kind::implemented, ""},
    {"stream", Kind::implemented, ""},
    {"stream_options", Kind::implemented, ""},
    {"stop", Kind::implemented, ""},
    {"seed", Kind::implemented, ""},
    {"presence_penalty", Kind::implemented, ""},
    {"frequency_penalty", Kind::implemented, ""},
    {"logprobs", Kind::implemented, ""},
    // vLLM's sampling extensions.
    {"top_k", Kind::implemented, ""},
    {"min_p", Kind::implemented, ""},
    {"repetition_penalty", Kind::implemented, ""},
    {"stop_token_ids", Kind::implemented, ""},
    {"ignore_eos", Kind::implemented, ""},
    {"skip_special_tokens", Kind::implemented, ""},
    {"user", Kind::harmless, "an end-user id for the provider's abuse monitoring; it never changes the output"},
    {"logit_bias", Kind::implemented, ""},
    {"response_format", Kind::implemented, ""},  // text, json_object, json_schema (server/output_request.h)
};

const std::vector<FieldRule> kChatOnly = {
    {"messages", Kind::implemented, ""},
    {"max_completion_tokens", Kind::implemented, ""},
    {"top_logprobs", Kind::implemented, ""},
    {"tools", Kind::implemented, ""},
    {"tool_choice", Kind::implemented, ""},
    {"parallel_tool_calls", Kind::implemented, ""},
    {"chat_template_kwargs", Kind::implemented, ""},
    {"reasoning_effort", Kind::implemented, ""},  // a chat-template variable, as vLLM passes it (400 if the template reads none)
    {"safety_identifier", Kind::harmless, "an end-user id for the provider's abuse monitoring; it never changes the output"},
    {"metadata", Kind::harmless, "tags for stored completions; this server stores none"},
    {"store", Kind::harmless, "false only: this server stores no completions"},
    {"service_tier", Kind::harmless, "\"auto\" or \"default\" only: the provider's billing tier, one tier here"},
    {"prompt_cache_key", Kind::harmless, "a routing hint for the provider's prompt cache; the prefix cache here needs none"},
    {"prompt_cache_retention", Kind::harmless, "a caching policy: it changes cost and latency, never the output"},
    {"prompt_cache_options", Kind::harmless, "caching breakpoints and lifetime: they change cost and latency, never the output"},
    {"modalities", Kind::harmless, "[\"text\"] only: text is the one output modality"},
    {"audio", Kind::refused, "audio output is not supported"},
    {"moderation", Kind::refused, "this server runs no moderation"},
    {"functions", Kind::refused, "the deprecated 'functions' is not supported; send 'tools'"},
    {"function_call", Kind::refused, "the deprecated 'function_call' is not supported; send 'tool_choice'"},
    {"prediction", Kind::refused, "predicted outputs are not supported"},
    {"verbosity", Kind::refused, "'verbosity' is not supported"},
    {"web_search_options", Kind::refused, "web search is not supported"},
};

const std::vector<FieldRule> kCompletionsOnly = {
    {"prompt", Kind::implemented, ""},
    {"echo", Kind::implemented, ""},         // false only; true is refused in the parser
    {"grammar", Kind::implemented, ""},      // llama.cpp's name: a grammar in the text form of docs/grammar.md
    {"json_schema", Kind::implemented, ""},  // llama.cpp's shorthand for response_format json_schema
    {"best_of", Kind::harmless, "equal to n only: the server returns every choice it generates"},
    {"suffix", Kind::refused, "'suffix' (fill-in-the-middle) is not supported; an empty suffix is accepted"},
};

// Harmless or refused fields that are fine with some values.
bool value_is_harmless(const std::string& field, const json& v, const json& body) {
  if (field == "user" || field == "safety_identifier") return v.is_string();
  if (field == "metadata") return v.is_object();
  if (field == "store") return v.is_boolean() && !v.get<bool>();
  if (field == "service_tier") return v.is_string() && (v == "auto" || v == "default");
  if (field == "prompt_cache_key") return v.is_string();
  if (field == "prompt_cache_retention") return v == "in_memory" || v == "24h";
  if (field == "prompt_cache_options") return v.is_object();
  if (field == "modalities") return v.is_array() && v.size() == 1 && v[0] == "text";
  if (field == "suffix") return v.is_string() && v.get<std::string>().empty();
  if (field == "best_of") {
    const json n = body.contains("n") && !body["n"].is_null() ? body["n"] : json(1);
    return v.is_number_integer() && v == n;
  }
  return false;
}

}  // namespace

const std::vector<FieldRule>& request_field_rules(bool chat) {
  static const std::vector<FieldRule> chat_rules = [] {
    std::vector<FieldRule> r = kCommon;
    r.insert(r.end(), kChatOnly.begin(), kChatOnly.end());
    return r;
  }();
  static const std::vector<FieldRule> completion_rules = [] {
    std::vector<FieldRule> r = kCommon;
    r.insert(r.end(), kCompletionsOnly.begin(), kCompletionsOnly.end());
    return r;
  }();
  return chat ? chat_rules : completion_rules;
}

void reject_unsupported_fields(const json& body, bool chat) {
  check_request_fields(body, request_field_rules(chat), chat ? "/v1/chat/completions" : "/v1/completions",
                       [&body](const FieldRule&, const std::string& field, const json& value) {
                         return value_is_harmless(field, value, body);
                       });
}

void check_request_fields(const json& body, const std::vector<FieldRule>& rules, std::string_view endpoint, const AcceptedValue& accepted) {
  for (const auto& [field, value] : body.items()) {
    if (value.is_null()) continue;  // null means "not given"
    const auto rule = std::find_if(rules.begin(), rules.end(), [&field = field](const FieldRule& r) { return r.name == field; });
    if (rule == rules.end())
      throw bad_request("'" + field + "' is not a field this server implements for " + std::string(endpoint) + "; remove it", field,
                        "unsupported_parameter");
    if (rule->kind == Kind::implemented || accepted(*rule, field, value)) continue;
    refuse_field(field, rule->reason);
  }
}

void refuse_field(const std::string& param, std::string_view why) {
  throw bad_request("'" + param + "' is not supported: " + std::string(why), param, "unsupported_parameter");
}

}  // namespace sanctum::server

#pragma once
// Which top-level request fields /v1/chat/completions and /v1/completions accept. A field is either
// implemented, harmless (accepted with no effect on the output, for a stated reason), or refused
// with a 400 that names it: an agent client must never get a 200 that quietly dropped what it asked
// for. Fields that are accepted only with certain values (store, modalities, ...) are checked here.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace sanctum::server {

struct FieldRule {
  std::string_view name;
  enum class Kind { implemented, harmless, refused } kind;
  std::string_view reason;  // harmless: why it changes nothing; refused: what to do instead
};

// The table for one endpoint (chat: /v1/chat/completions, else /v1/completions).
const std::vector<FieldRule>& request_field_rules(bool chat);

// Throws a 400 naming the first field that is neither implemented nor harmless, or harmless only
// with other values than the ones given.
void reject_unsupported_fields(const nlohmann::ordered_json& body, bool chat);

// Whether a field that is not `implemented` is fine with the value given.
using AcceptedValue = std::function<bool(const FieldRule& rule, const std::string& field, const nlohmann::ordered_json& value)>;
// The check of every endpoint's table: a 400 naming the first non-null field of `body` that `rules`
// does not list ("... for `endpoint`"), or that is not implemented and not `accepted`.
void check_request_fields(const nlohmann::ordered_json& body, const std::vector<FieldRule>& rules, std::string_view endpoint,
                          const AcceptedValue& accepted);
// A request field that only some values make harmless: 400 naming it otherwise.
[[noreturn]] void refuse_field(const std::string& param, std::string_view why);

}  // namespace sanctum::server

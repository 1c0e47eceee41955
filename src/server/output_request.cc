#include "server/output_request.h"

#include <cmath>
#include <limits>

#include "server/api_error.h"

namespace sanctum::server {

namespace {

using json = nlohmann::ordered_json;

bool given(const json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

// Keys an object may hold; any other is a 400 naming it (a misspelled "schema" must not pass as no schema).
void only_keys(const json& object, std::initializer_list<const char*> keys, const std::string& where) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const char* k : keys) known = known || key == k;
    if (!known) throw bad_request("'" + where + "' has no field '" + key + "'", where + "." + key, "unsupported_parameter");
  }
}

OutputFormat response_format(const json& rf) {
  OutputFormat f;
  f.param = "response_format";
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    throw bad_request("'response_format' must be an object with a string 'type'", "response_format");
  const std::string type = rf["type"].get<std::string>();
  if (type == "text") {
    only_keys(rf, {"type"}, "response_format");
    return f;
  }
  if (type == "json_object") {
    only_keys(rf, {"type"}, "response_format");
    f.kind = OutputFormat::Kind::json_object;
    return f;
  }
  if (type != "json_schema")
    throw bad_request("response_format type '" + type + "' is not supported; send \"text\", \"json_object\" or \"json_schema\"",
                      "response_format.type", "unsupported_parameter");
  only_keys(rf, {"type", "json_schema"}, "response_format");
  if (!given(rf, "json_schema") || !rf["json_schema"].is_object())
    throw bad_request("response_format type \"json_schema\" needs a 'json_schema' object: {\"name\": ..., \"schema\": {...}}",
                      "response_format.json_schema");
  const json& js = rf["json_schema"];
  only_keys(js, {"name", "schema", "strict", "description"}, "response_format.json_schema");
  if (given(js, "name") && !js["name"].is_string()) throw bad_request("'name' must be a string", "response_format.json_schema.name");
  if (given(js, "description") && !js["description"].is_string())
    throw bad_request("'description' must be a string", "response_format.json_schema.description");
  if (given(js, "strict") && !js["strict"].is_boolean())
    throw bad_request("'strict' must be a boolean", "response_format.json_schema.strict");
  if (!given(js, "schema") || !js["schema"].is_object())
    throw bad_request("response_format.json_schema needs a 'schema' object (a JSON Schema)", "response_format.json_schema.schema");
  f.kind = OutputFormat::Kind::json_schema;
  f.schema = js["schema"];
  return f;
}

}  // namespace

OutputFormat parse_output_format(const json& body, bool chat) {
  std::vector<OutputFormat> given_formats;
  if (given(body, "response_format")) {
    OutputFormat f = response_format(body["response_format"]);
    if (f.kind != OutputFormat::Kind::text) given_formats.push_back(std::move(f));
  }
  if (!chat && given(body, "grammar")) {
    if (!body["grammar"].is_string() || body["grammar"].get<std::string>().empty())
      throw bad_request("'grammar' must be a non-empty string in the grammar form of docs/grammar.md", "grammar");
    OutputFormat f;
    f.kind = OutputFormat::Kind::grammar;
    f.grammar = body["grammar"].get<std::string>();
    f.param = "grammar";
    given_formats.push_back(std::move(f));
  }
  if (!chat && given(body, "json_schema")) {
    if (!body["json_schema"].is_object()) throw bad_request("'json_schema' must be a JSON Schema object", "json_schema");
    OutputFormat f;
    f.kind = OutputFormat::Kind::json_schema;
    f.schema = body["json_schema"];
    f.param = "json_schema";
    given_formats.push_back(std::move(f));
  }
  if (given_formats.size() > 1)
    throw bad_request("'" + given_formats[1].param + "' and '" + given_formats[0].param + "' both constrain the output; send one",
                      given_formats[1].param);
  return given_formats.empty() ? OutputFormat{} : std::move(given_formats[0]);
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& body) {
  std::vector<std::pair<int32_t, float>> out;
  if (!given(body, "logit_bias")) return out;
  const json& lb = body["logit_bias"];
  if (!lb.is_object()) throw bad_request("'logit_bias' must be an object of token ids to biases", "logit_bias");
  if (lb.size() > kMaxLogitBias)
    throw bad_request("'logit_bias' may hold at most " + std::to_string(kMaxLogitBias) + " tokens", "logit_bias");
  for (const auto& [key, value] : lb.items()) {
    // A token id in decimal, as OpenAI takes it ("50256").
    bool digits = !key.empty() && key.size() <= 10;
    for (char c : key) digits = digits && c >= '0' && c <= '9';
    const long long id = digits ? std::stoll(key) : -1;
    if (!digits || id > std::numeric_limits<int32_t>::max())
      throw bad_request("Invalid key in 'logit_bias': '" + key + "'; keys are token ids (non-negative integers as strings)", "logit_bias");
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100.0 || value.get<double>() > 100.0)
      throw bad_request("'logit_bias' value for token " + key + " must be a number from -100 to 100", "logit_bias");
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(value.get<double>()));
  }
  return out;
}

}  // namespace sanctum::server

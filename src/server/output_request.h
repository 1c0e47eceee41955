#pragma once
// The request fields that constrain the output, parsed and validated without a model (the grammar is
// compiled later, against the serving model's vocabulary): `response_format` (text, json_object,
// json_schema), and on /v1/completions also `grammar` (the text form of docs/grammar.md, as
// llama.cpp's server spells it) and a top-level `json_schema` (llama.cpp's shorthand); `logit_bias`
// on both endpoints. Problems are 400s naming the field.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace sanctum::server {

struct OutputFormat {
  enum class Kind { text, json_object, json_schema, grammar };
  Kind kind = Kind::text;
  nlohmann::ordered_json schema;  // json_schema: the schema, keys in the client's order
  std::string grammar;            // grammar: its text
  std::string param;              // the field it came from, for errors: "response_format", "grammar", "json_schema"
};

inline constexpr size_t kMaxLogitBias = 1024;

OutputFormat parse_output_format(const nlohmann::ordered_json& body, bool chat);

// OpenAI's form: {"token id": bias in [-100, 100]}. Ids are checked against the vocabulary later.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const nlohmann::ordered_json& body);

}  // namespace sanctum::server

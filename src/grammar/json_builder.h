#pragma once
// Builds grammar rules for JSON values from a schema (json_schema.h is the entry point). One builder
// per document: $ref targets become one rule each, so recursive schemas stay finite.
#include <map>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace sanctum::grammar {

class JsonBuilder {
 public:
  JsonBuilder(Grammar& g, const nlohmann::json& document, const JsonGrammarOptions& options);

  // A JSON value satisfying `schema` (at JSON-pointer-like `path`, for errors).
  Item value(const nlohmann::json& schema, const std::string& path, int depth);
  Item ws() const { return ws_; }

 private:
  [[noreturn]] void unsupported(const std::string& feature, const std::string& path, const std::string& detail) const;
  void check_keywords(const nlohmann::json& schema, const std::string& path) const;
  Item ref(const std::string& pointer, const std::string& path, int depth);
  const nlohmann::json& resolve(const std::string& pointer, const std::string& path) const;
  nlohmann::json merge(const nlohmann::json& base, const nlohmann::json& extra, const std::string& path) const;
  Item one_of(const nlohmann::json& schema, const nlohmann::json& siblings, const std::string& key, const std::string& path, int depth);
  Item typed(const std::string& type, const nlohmann::json& schema, const std::string& path, int depth);
  Item enum_item(const nlohmann::json& values, const nlohmann::json& schema, const std::string& path);
  Item literal(const std::string& text, const std::string& name);

  // json_builder_types.cc
  Item object(const nlohmann::json& schema, const std::string& path, int depth);
  Item map_object(const nlohmann::json& value_schema, int64_t min, int64_t max, const std::string& path, int depth);
  Item array(const nlohmann::json& schema, const std::string& path, int depth);
  Item string(const nlohmann::json& schema, const std::string& path);
  Item number(const nlohmann::json& schema, bool integer, const std::string& path);
  Item any_value();
  Item string_any();
  Item sep();

  Grammar& g_;
  const nlohmann::json& document_;
  JsonGrammarOptions options_;
  Item ws_;
  std::optional<Item> any_value_, string_any_, sep_, number_any_, integer_any_;
  std::map<std::string, uint32_t> refs_;  // pointer -> rule
  size_t counter_ = 0;
};

// The JSON type names a schema can produce ("integer" included in "number"), or nullopt for "any".
std::optional<std::set<std::string>> schema_types(const nlohmann::json& schema);

}  // namespace sanctum::grammar

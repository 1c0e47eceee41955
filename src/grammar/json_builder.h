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
  JsonBuilder(Grammar& g, const SchemaJson& document, const JsonGrammarOptions& options);

  // A JSON value satisfying `schema` (at JSON-pointer-like `path`, for errors).
  Item value(const SchemaJson& schema, const std::string& path, int depth);
  Item ws() const { return ws_; }

 private:
  [[noreturn]] void unsupported(const std::string& feature, const std::string& path, const std::string& detail) const;
  void check_keywords(const SchemaJson& schema, const std::string& path) const;
  Item ref(const std::string& pointer, const std::string& path, int depth);
  const SchemaJson& resolve(const std::string& pointer, const std::string& path) const;
  SchemaJson merge(const SchemaJson& base, const SchemaJson& extra, const std::string& path) const;
  Item one_of(const SchemaJson& schema, const SchemaJson& siblings, const std::string& key, const std::string& path, int depth);
  Item typed(const std::string& type, const SchemaJson& schema, const std::string& path, int depth);
  Item enum_item(const SchemaJson& values, const SchemaJson& schema, const std::string& path);
  Item literal(const std::string& text, const std::string& name);

  // json_builder_types.cc
  Item object(const SchemaJson& schema, const std::string& path, int depth);
  Item map_object(const SchemaJson& value_schema, int64_t min, int64_t max, const std::string& path, int depth);
  Item array(const SchemaJson& schema, const std::string& path, int depth);
  Item string(const SchemaJson& schema, const std::string& path);
  Item number(const SchemaJson& schema, bool integer, const std::string& path);
  Item any_value();
  Item string_any();
  Item sep();

  Grammar& g_;
  const SchemaJson& document_;
  JsonGrammarOptions options_;
  Item ws_;
  // bounded_char_: one character rule for every length-bounded string, so their repeats share masks.
  std::optional<Item> any_value_, string_any_, sep_, number_any_, integer_any_, bounded_char_;
  std::map<std::string, uint32_t> refs_;  // pointer -> rule
  size_t counter_ = 0;
};

// The JSON type names a schema can produce ("integer" included in "number"), or nullopt for "any".
std::optional<std::set<std::string>> schema_types(const SchemaJson& schema);

}  // namespace sanctum::grammar

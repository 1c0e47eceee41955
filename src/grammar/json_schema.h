#pragma once
// JSON Schema to grammar. Supported: type (and type lists), properties, required,
// additionalProperties (false, true or a schema: see docs/grammar.md for how extra keys are made),
// enum, const, items / prefixItems (and draft-4 tuple items), minItems, maxItems, anyOf, oneOf with
// disjoint branches, allOf of one schema, $ref into the document ($defs, definitions, any JSON pointer,
// recursion included), string minLength / maxLength / pattern / format (date, time, date-time, uuid,
// email, ipv4, hostname, uri), integer and number minimum / maximum (exclusive too). A validation
// keyword we cannot enforce raises GrammarError naming it; annotations are ignored.
#include <memory>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace sanctum::grammar {

// Schemas keep their key order: properties are generated in the order they are declared (a model
// is trained to write them so). Parse with nlohmann::ordered_json to keep it; a nlohmann::json
// schema has its keys sorted already.
using SchemaJson = nlohmann::ordered_json;

struct JsonGrammarOptions {
  // Whitespace allowed in each gap between tokens of JSON syntax (after '{', around ':' and ',',
  // before '}' ...): 0 means compact output. A bound keeps a model from emitting blanks forever.
  int max_whitespace = 4;
  // Repetition counts (maxItems, maxLength, {m,n}) above this are refused rather than expanded.
  int64_t max_repeat = 2000;
  // ASCII characters that strings hold only as a \u00XX escape, never raw: a tool-call format whose
  // parser ends a call at a tag ("</tool_call>") needs '<' out of the argument text.
  std::string escaped_only;
  GrammarLimits limits;
};

std::shared_ptr<const Grammar> json_schema_grammar(const SchemaJson& schema, const JsonGrammarOptions& options = {});
// Any JSON object (response_format json_object).
std::shared_ptr<const Grammar> json_object_grammar(const JsonGrammarOptions& options = {});

}  // namespace sanctum::grammar

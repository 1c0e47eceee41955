#pragma once
// Regular expressions (the subset JSON Schema `pattern` and our `format`s use) lowered to grammar
// items that match the JSON-escaped text of a string whose decoded value matches the expression.
// Supported: literals, escapes (\d \w \s \D \W \S \n \t \r \xHH \uHHHH and escaped punctuation),
// classes with ranges and negation, `.`, groups ( ) (?: ) (?<name> ), alternation, quantifiers
// ? * + {m} {m,} {m,n} (a lazy `?` suffix is accepted: it changes no match), ^ at the start and $ at
// the end. Anything else (backreferences, lookaround, \b, anchors inside) raises GrammarError.
#include <string>
#include <string_view>

#include "grammar/codepoints.h"
#include "grammar/grammar.h"

namespace sanctum::grammar {

// Matches one decoded character from `set`, as raw UTF-8 or as its JSON escape; the ASCII characters
// of `escaped_only` only as their \u00xx escape.
Item json_char_item(Grammar& g, const CodepointSet& set, const std::string& name, std::string_view escaped_only = {});

// The inside of a JSON string (no quotes) whose value matches `pattern` with search semantics: an
// unanchored side may carry any other characters.
Item json_pattern_item(Grammar& g, std::string_view pattern, const std::string& name, std::string_view escaped_only = {});

// `json_text` (a JSON value's text) with the characters of `escaped_only` inside its strings
// written as \u00xx (outside strings JSON text holds none of them).
std::string escape_only(std::string json_text, std::string_view escaped_only);

}  // namespace sanctum::grammar

#pragma once
// The plain grammar form (docs/grammar.md): GBNF-like rules over Unicode text.
//   root   ::= "{" ws pair ("," ws pair)* ws "}"   # the start rule is `root`
//   pair   ::= name ":" [0-9]+
//   name   ::= [a-zA-Z_] [a-zA-Z0-9_]{0,31}
// Literals "..." or '...' (escapes \n \r \t \\ \" \' \xHH \uHHHH \UHHHHHHHH), char classes [a-z],
// [^"\\], the any-character dot, groups ( ), alternatives |, and ? * + {m} {m,} {m,n} {,n}.
#include <memory>
#include <string_view>

#include "grammar/grammar.h"

namespace sanctum::grammar {

// Throws GrammarError with the line and column of the first problem.
std::shared_ptr<const Grammar> parse_grammar_text(std::string_view text, GrammarLimits limits = {});

// Appends the rules of `text` to `g` (names prefixed by `prefix`) and returns its `root` rule without
// finishing g: the schema compiler embeds regular-expression lowerings this way.
uint32_t add_grammar_text(Grammar& g, std::string_view text, const std::string& prefix);

}  // namespace sanctum::grammar

#pragma once
// Splits a template into text / {{ expression }} / {% statement %} chunks, applying the whitespace rules
// transformers uses (trim_blocks, lstrip_blocks, "-" and "+" markers, one trailing newline dropped), and
// tokenizes the inside of tags.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sanctum::jinja {

struct Token {
  enum class Type { name, string, integer, number, op, end };
  Type type = Type::end;
  std::string text;  // name, operator, or decoded string literal
  int64_t i = 0;
  double d = 0;
  int line = 0;
};

struct Chunk {
  enum class Kind { text, expression, statement };
  Kind kind = Kind::text;
  std::string text;           // text chunks
  std::vector<Token> tokens;  // tags; always ends with an `end` token
  int line = 0;
};

// Throws Error(invalid_input) "chat template: line N: ..." on unterminated tags or bad literals.
std::vector<Chunk> lex_template(std::string_view source);

[[noreturn]] void syntax_error(int line, const std::string& message);

}  // namespace sanctum::jinja

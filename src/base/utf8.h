#pragma once
// UTF-8 helpers shared by the tokenizer, chat templates and server: validation (with the byte offset of the first bad sequence),
// code point iteration and encoding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sanctum::utf8 {

// Length of the sequence starting with lead byte b (1..4), or 0 for a byte that cannot start one.
inline size_t sequence_length(uint8_t b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return b >= 0xC2 ? 2 : 0;
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return b <= 0xF4 ? 4 : 0;
  return 0;
}

// Returns npos when s is valid UTF-8 (no surrogates, no overlongs), otherwise the offset of the first bad byte.
size_t find_invalid(std::string_view s);
inline bool is_valid(std::string_view s) { return find_invalid(s) == std::string_view::npos; }

// Throws Error(invalid_input) naming the byte offset when s is not valid UTF-8. `what` names the input.
void require_valid(std::string_view s, const char* what);

// Decodes the code point at s[i] (s must be valid); advances i.
char32_t next(std::string_view s, size_t& i);
void append(std::string& out, char32_t cp);

// Length of the longest prefix of s made of complete, valid sequences; `incomplete_tail` is set when
// the rest is a prefix of a valid sequence (more bytes could complete it).
size_t valid_prefix(std::string_view s, bool* incomplete_tail);

// Replaces invalid sequences the way Rust's String::from_utf8_lossy does (one U+FFFD per maximal
// invalid subpart).
std::string lossy(std::string_view s);

}  // namespace sanctum::utf8

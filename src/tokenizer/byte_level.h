#pragma once
// GPT-2 byte-level alphabet: every byte maps to one printable code point, so byte strings can live in
// a text vocabulary ("Ġ" is the space byte).
#include <cstdint>
#include <string>
#include <string_view>

namespace sanctum::byte_level {

char32_t byte_to_char(uint8_t b);
// Returns -1 when the code point is not in the alphabet.
int char_to_byte(char32_t c);

// Maps raw bytes to their alphabet form (UTF-8 encoded).
std::string encode(std::string_view bytes);
// Maps an alphabet string back to raw bytes; false (out untouched) when some char is outside the alphabet.
bool decode(std::string_view text, std::string& out);

}  // namespace sanctum::byte_level

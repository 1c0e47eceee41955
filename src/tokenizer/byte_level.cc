#include "tokenizer/byte_level.h"

#include <array>

#include "base/utf8.h"

namespace sanctum::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> to_utf8;
  Tables() {
    // Printable bytes keep their code point; the others take 256, 257, ... in byte order.
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      utf8::append(to_utf8[b], to_char[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(uint8_t b) { return tables().to_char[b]; }

int char_to_byte(char32_t c) {
  if (c < 256) {
    const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
    return printable ? static_cast<int>(c) : -1;
  }
  // 256 + k is the k-th non-printable byte.
  static const auto reverse = [] {
    std::array<int16_t, 68> r{};
    for (int b = 0; b < 256; ++b) {
      const char32_t ch = byte_to_char(static_cast<uint8_t>(b));
      if (ch >= 256) r[ch - 256] = static_cast<int16_t>(b);
    }
    return r;
  }();
  if (c - 256 < reverse.size()) return reverse[c - 256];
  return -1;
}

std::string encode(std::string_view bytes) {
  const auto& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.to_utf8[static_cast<uint8_t>(c)];
  return out;
}

bool decode(std::string_view text, std::string& out) {
  std::string bytes;
  bytes.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const int b = char_to_byte(utf8::next(text, i));
    if (b < 0) return false;
    bytes += static_cast<char>(b);
  }
  out += bytes;
  return true;
}

}  // namespace sanctum::byte_level

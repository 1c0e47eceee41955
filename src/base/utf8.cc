#include "base/utf8.h"

#include "base/error.h"

namespace sanctum::utf8 {
namespace {

// Length of the valid sequence at s[i], or 0 if invalid. `partial` receives how many bytes form a
// valid prefix of a sequence when the sequence is cut short or broken (WHATWG "maximal subpart").
size_t check_at(std::string_view s, size_t i, size_t* partial) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  *partial = 0;
  const size_t n = sequence_length(b0);
  if (n == 1) return 1;
  if (n == 0) return 0;
  *partial = 1;
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    const auto b = static_cast<uint8_t>(s[i + k]);
    uint8_t lo = 0x80, hi = 0xBF;
    if (k == 1) {
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;  // no surrogates
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    }
    if (b < lo || b > hi) return 0;
    *partial = k + 1;
  }
  *partial = 0;
  return n;
}

}  // namespace

size_t find_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t partial;
    const size_t n = check_at(s, i, &partial);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

void require_valid(std::string_view s, const char* what) {
  const size_t bad = find_invalid(s);
  if (bad != std::string_view::npos)
    fail(ErrorKind::invalid_input, std::string(what) + " is not valid UTF-8 (bad byte at offset " + std::to_string(bad) + ")");
}

char32_t next(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const size_t n = sequence_length(b0);
  char32_t cp = n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += n == 0 ? 1 : n;
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t valid_prefix(std::string_view s, bool* incomplete_tail) {
  size_t i = 0;
  *incomplete_tail = false;
  while (i < s.size()) {
    size_t partial;
    const size_t n = check_at(s, i, &partial);
    if (n == 0) {
      *incomplete_tail = partial > 0 && i + partial == s.size();
      return i;
    }
    i += n;
  }
  return i;
}

std::string lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t partial;
    const size_t n = check_at(s, i, &partial);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += partial > 0 ? partial : 1;
    }
  }
  return out;
}

}  // namespace sanctum::utf8

#include "chat/jinja/lexer.h"

#include <cstdlib>

#include "base/error.h"
#include "chat/jinja/value.h"

namespace sanctum::jinja {

void syntax_error(int line, const std::string& message) {
  fail(ErrorKind::invalid_input, "chat template: line " + std::to_string(line) + ": " + message);
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int line_at(std::string_view src, size_t pos) {
  int line = 1;
  for (size_t i = 0; i < pos && i < src.size(); ++i) line += src[i] == '\n';
  return line;
}

// Decodes a Python string literal body (the part between quotes).
std::string unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    auto hex = [&](size_t n) {
      if (i + n >= body.size()) syntax_error(line, "truncated escape in string literal");
      const std::string digits(body.substr(i + 1, n));
      char* end = nullptr;
      const unsigned long v = std::strtoul(digits.c_str(), &end, 16);
      if (digits.size() != n || *end) syntax_error(line, "bad escape in string literal");
      i += n;
      out += from_u32(std::u32string(1, static_cast<char32_t>(v)));
    };
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '0': out += '\0'; break;
      case '\n': break;
      case 'x': hex(2); break;
      case 'u': hex(4); break;
      case 'U': hex(8); break;
      default: out += '\\'; out += c;
    }
  }
  return out;
}

std::vector<Token> lex_tag(std::string_view s, int line) {
  static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "|",
                                     ".",  ",",  ":",  "(",  ")",  "[",  "]", "{", "}", "<", ">", "="};
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') ++line;
    if (is_space(c)) {
      ++i;
      continue;
    }
    Token t;
    t.line = line;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      t.type = Token::Type::name;
      t.text = std::string(s.substr(i, j - i));
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      std::string num;
      for (size_t k = i; k < j; ++k)
        if (s[k] != '_') num += s[k];
      if (is_float) {
        t.type = Token::Type::number;
        t.d = std::strtod(num.c_str(), nullptr);
      } else {
        t.type = Token::Type::integer;
        t.i = std::strtoll(num.c_str(), nullptr, 10);
      }
      i = j;
    } else if (c == '\'' || c == '"') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != c) {
        if (s[j] == '\\') ++j;
        if (j < s.size() && s[j] == '\n') ++line;
        ++j;
      }
      if (j >= s.size()) syntax_error(t.line, "unterminated string literal");
      t.type = Token::Type::string;
      t.text = unescape(s.substr(i + 1, j - i - 1), t.line);
      i = j + 1;
    } else {
      bool matched = false;
      for (const char* op : kOps) {
        const std::string_view o(op);
        if (s.compare(i, o.size(), o) == 0) {
          t.type = Token::Type::op;
          t.text = std::string(o);
          i += o.size();
          matched = true;
          break;
        }
      }
      if (!matched) syntax_error(line, std::string("unexpected character '") + c + "'");
    }
    out.push_back(std::move(t));
  }
  Token end;
  end.line = line;
  out.push_back(end);
  return out;
}

}  // namespace

std::vector<Chunk> lex_template(std::string_view raw) {
  // Newlines normalise to "\n" and one trailing newline is dropped (Jinja keep_trailing_newline=False).
  std::string src;
  src.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\r') {
      src += '\n';
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
    } else {
      src += raw[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();

  std::vector<Chunk> chunks;
  size_t pos = 0;
  bool strip_next = false;  // "-" on the previous tag's close
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' && src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open != std::string::npos && open + 1 >= src.size()) open = std::string::npos;
    std::string text = src.substr(pos, (open == std::string::npos ? src.size() : open) - pos);
    const size_t text_start = pos;
    if (strip_next) {
      size_t k = 0;
      while (k < text.size() && is_space(text[k])) ++k;
      text.erase(0, k);
      strip_next = false;
    }
    if (open == std::string::npos) {
      if (!text.empty()) chunks.push_back({Chunk::Kind::text, text, {}, line_at(src, text_start)});
      break;
    }
    const char kind = src[open + 1];
    const int line = line_at(src, open);
    const char marker = open + 2 < src.size() ? src[open + 2] : '\0';
    if (marker == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (marker != '+' && kind != '{') {
      // lstrip_blocks: drop spaces/tabs between the line start and a block or comment tag.
      size_t k = text.size();
      while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '\t')) --k;
      const bool line_start = k > 0 ? text[k - 1] == '\n' : (text_start == 0 || src[text_start - 1] == '\n');
      if (line_start) text.erase(k);
    }
    if (!text.empty()) chunks.push_back({Chunk::Kind::text, text, {}, line_at(src, text_start)});

    const size_t body = open + 2 + ((marker == '-' || marker == '+') ? 1 : 0);
    const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t end;
    if (kind == '#') {
      end = src.find(close, body);
    } else {
      // Find the closer outside string literals.
      end = std::string::npos;
      char quote = 0;
      for (size_t k = body; k + 1 < src.size(); ++k) {
        if (quote) {
          if (src[k] == '\\') ++k;
          else if (src[k] == quote) quote = 0;
        } else if (src[k] == '\'' || src[k] == '"') {
          quote = src[k];
        } else if (src.compare(k, 2, close) == 0) {
          end = k;
          break;
        }
      }
    }
    if (end == std::string::npos) syntax_error(line, std::string("unterminated '{") + kind + "' tag (missing '" + close + "')");
    size_t inner_end = end;
    const char close_marker = end > body ? src[end - 1] : '\0';
    if (close_marker == '-' || close_marker == '+') --inner_end;
    pos = end + 2;
    if (close_marker == '-') {
      strip_next = true;
    } else if (close_marker != '+' && kind != '{' && pos < src.size() && src[pos] == '\n') {
      ++pos;  // trim_blocks
    }
    if (kind == '#') continue;
    const std::string inner = src.substr(body, inner_end - body);
    Chunk c;
    c.kind = kind == '{' ? Chunk::Kind::expression : Chunk::Kind::statement;
    c.line = line;
    c.tokens = lex_tag(inner, line);
    // {% raw %} ... {% endraw %}: the text in between is literal.
    if (c.kind == Chunk::Kind::statement && c.tokens.size() == 2 && c.tokens[0].text == "raw") {
      size_t search = pos;
      while (true) {
        const size_t t = src.find("{%", search);
        if (t == std::string::npos) syntax_error(line, "missing {% endraw %}");
        size_t k = t + 2;
        const bool dash = k < src.size() && src[k] == '-';
        if (dash || (k < src.size() && src[k] == '+')) ++k;
        while (k < src.size() && is_space(src[k])) ++k;
        if (src.compare(k, 6, "endraw") == 0) {
          std::string literal = src.substr(pos, t - pos);
          if (dash)
            while (!literal.empty() && is_space(literal.back())) literal.pop_back();
          chunks.push_back({Chunk::Kind::text, literal, {}, line});
          const size_t close_at = src.find("%}", k);
          if (close_at == std::string::npos) syntax_error(line, "unterminated endraw tag");
          pos = close_at + 2;
          if (src[close_at - 1] == '-') strip_next = true;
          else if (pos < src.size() && src[pos] == '\n') ++pos;
          break;
        }
        search = t + 2;
      }
      continue;
    }
    chunks.push_back(std::move(c));
  }
  return chunks;
}

}  // namespace sanctum::jinja

#include "grammar/json_regex.h"

#include "base/utf8.h"

namespace sanctum::grammar {

namespace {

constexpr int kMaxRegexNesting = 50;
constexpr size_t kMaxRegexBytes = 4096;

CodepointSet digits() { return CodepointSet{{{'0', '9'}}}; }
CodepointSet word() { return CodepointSet{{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}}; }
CodepointSet space() { return CodepointSet{{{'\t', '\r'}, {' ', ' '}}}; }
// Python's \d \w \s also match non-ASCII digits, letters and spaces, so their negations stay ASCII.
CodepointSet ascii_without(const CodepointSet& s) { return CodepointSet{{{0, 0x7F}}}.minus(s); }

class RegexParser {
 public:
  RegexParser(Grammar& g, std::string_view p, std::string name, std::string_view escaped_only)
      : g_(g), p_(p), name_(std::move(name)), escaped_only_(escaped_only) {}

  Item parse() {
    if (p_.size() > kMaxRegexBytes) unsupported("a pattern over 4096 bytes");
    if (!utf8::is_valid(p_)) unsupported("a pattern that is not valid UTF-8");
    bool anchored_start = false, anchored_end = false;
    if (!p_.empty() && p_[0] == '^') anchored_start = true, ++i_;
    std::string_view body = p_;
    size_t end = p_.size();
    if (end > i_ && p_[end - 1] == '$' && (end < 2 || p_[end - 2] != '\\')) anchored_end = true, --end;
    p_ = body.substr(0, end);
    std::vector<Sequence> alts = parse_alternatives(0);
    if (i_ != p_.size()) unsupported("an unbalanced ')'");
    Item core = alts.size() == 1 ? as_item(g_, alts[0], name_) : Grammar::ref(g_.add_rule(name_, alts));
    const Item any = json_char_item(g_, CodepointSet{}.complement(), name_ + "_any", escaped_only_);
    Sequence seq;
    if (!anchored_start) seq.push_back(Grammar::ref(make_star(g_, any, name_ + "_pre")));
    seq.push_back(core);
    if (!anchored_end) seq.push_back(Grammar::ref(make_star(g_, any, name_ + "_post")));
    return as_item(g_, seq, name_);
  }

 private:
  [[noreturn]] void unsupported(const std::string& what) const {
    throw GrammarError("pattern", "json schema: pattern \"" + std::string(p_) + "\" uses " + what +
                                      ", which constrained decoding does not support; simplify the pattern");
  }

  std::vector<Sequence> parse_alternatives(int depth) {
    if (depth > kMaxRegexNesting) unsupported("groups nested too deeply");
    std::vector<Sequence> alts{parse_sequence(depth)};
    while (i_ < p_.size() && p_[i_] == '|') {
      ++i_;
      alts.push_back(parse_sequence(depth));
    }
    return alts;
  }

  Sequence parse_sequence(int depth) {
    Sequence seq;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      Item atom = parse_atom(depth);
      atom = parse_quantifier(atom);
      seq.push_back(atom);
    }
    return seq;
  }

  Item parse_quantifier(Item atom) {
    while (i_ < p_.size()) {
      const char c = p_[i_];
      int64_t lo, hi;
      if (c == '?') lo = 0, hi = 1, ++i_;
      else if (c == '*') lo = 0, hi = -1, ++i_;
      else if (c == '+') lo = 1, hi = -1, ++i_;
      else if (c == '{' && i_ + 1 < p_.size() && p_[i_ + 1] >= '0' && p_[i_ + 1] <= '9') {
        ++i_;
        lo = read_int();
        hi = lo;
        if (i_ < p_.size() && p_[i_] == ',') {
          ++i_;
          hi = (i_ < p_.size() && p_[i_] == '}') ? -1 : read_int();
        }
        if (i_ >= p_.size() || p_[i_] != '}') unsupported("a malformed {m,n}");
        ++i_;
      } else {
        break;
      }
      if (i_ < p_.size() && p_[i_] == '?') ++i_;  // lazy: the same language
      if (i_ < p_.size() && p_[i_] == '+') unsupported("a possessive quantifier");
      atom = Grammar::ref(make_repeat(g_, atom, lo, hi, name_ + "_rep", 1000));
    }
    return atom;
  }

  int64_t read_int() {
    int64_t v = 0;
    const size_t start = i_;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      v = v * 10 + (p_[i_++] - '0');
      if (v > 100000) unsupported("a repetition count over 100000");
    }
    if (i_ == start) unsupported("a malformed {m,n}");
    return v;
  }

  Item char_item(const CodepointSet& set) { return json_char_item(g_, set, name_ + "_c", escaped_only_); }

  Item parse_atom(int depth) {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (i_ < p_.size() && p_[i_] == '?') {
        if (p_.substr(i_).starts_with("?:")) i_ += 2;
        else if (p_.substr(i_).starts_with("?<") && i_ + 2 < p_.size() && p_[i_ + 2] != '=' && p_[i_ + 2] != '!') {
          while (i_ < p_.size() && p_[i_] != '>') ++i_;
          ++i_;
        } else if (p_.substr(i_).starts_with("?P<")) {
          while (i_ < p_.size() && p_[i_] != '>') ++i_;
          ++i_;
        } else {
          unsupported("lookaround or an inline flag group");
        }
      }
      auto alts = parse_alternatives(depth + 1);
      if (i_ >= p_.size() || p_[i_] != ')') unsupported("an unclosed '('");
      ++i_;
      if (alts.size() == 1) return as_item(g_, alts[0], name_ + "_g");
      return Grammar::ref(g_.add_rule(name_ + "_g", alts));
    }
    if (c == '[') return char_item(parse_class());
    if (c == '.') {
      ++i_;
      return char_item(CodepointSet{{{'\n', '\n'}}}.complement());
    }
    if (c == '^' || c == '$') unsupported("an anchor that is not at the start or end");
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (c == '{') {
        ++i_;
        return char_item(CodepointSet{{{'{', '{'}}});
      }
      unsupported("a quantifier with nothing to repeat");
    }
    if (c == '\\') {
      CodepointSet set;
      parse_escape(set, false);
      return char_item(set);
    }
    const char32_t cp = utf8::next(p_, i_);
    return char_item(CodepointSet{{{cp, cp}}});
  }

  // Reads an escape after '\' into `set`; returns false when it is a class shorthand (not a range end).
  bool parse_escape(CodepointSet& set, bool in_class) {
    ++i_;
    if (i_ >= p_.size()) unsupported("a trailing backslash");
    const char e = p_[i_++];
    auto one = [&](char32_t cp) {
      set.add(cp, cp);
      return true;
    };
    switch (e) {
      case 'd': set.add(digits()); return false;
      case 'D': set.add(ascii_without(digits())); return false;
      case 'w': set.add(word()); return false;
      case 'W': set.add(ascii_without(word())); return false;
      case 's': set.add(space()); return false;
      case 'S': set.add(ascii_without(space())); return false;
      case 'n': return one('\n');
      case 't': return one('\t');
      case 'r': return one('\r');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0': return one(0);
      case 'x': return one(read_hex(2));
      case 'u': return one(read_hex(4));
      case 'b':
        if (in_class) return one('\b');
        unsupported("a word boundary \\b");
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9')) unsupported(std::string("the escape \\") + e);
        return one(static_cast<unsigned char>(e));
    }
  }

  char32_t read_hex(int n) {
    char32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (i_ >= p_.size()) unsupported("a truncated hex escape");
      const char h = p_[i_++];
      int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) unsupported("a bad hex escape");
      v = v * 16 + static_cast<char32_t>(d);
    }
    return v;
  }

  CodepointSet parse_class() {
    ++i_;
    bool negate = false;
    if (i_ < p_.size() && p_[i_] == '^') negate = true, ++i_;
    CodepointSet set;
    bool first = true;
    while (i_ < p_.size() && (p_[i_] != ']' || first)) {
      first = false;
      if (p_.substr(i_).starts_with("[:")) unsupported("a POSIX class");
      char32_t lo;
      if (p_[i_] == '\\') {
        CodepointSet one;
        if (!parse_escape(one, true)) {
          set.add(one);
          continue;
        }
        lo = one.ranges[0].first;
      } else {
        lo = utf8::next(p_, i_);
      }
      char32_t hi = lo;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (p_[i_] == '\\') {
          CodepointSet one;
          if (!parse_escape(one, true)) unsupported("a class range ending in a shorthand");
          hi = one.ranges[0].first;
        } else {
          hi = utf8::next(p_, i_);
        }
        if (hi < lo) unsupported("a reversed class range");
      }
      set.add(lo, hi);
    }
    if (i_ >= p_.size()) unsupported("an unclosed '['");
    ++i_;
    set.normalize();
    return negate ? set.complement() : set;
  }

  Grammar& g_;
  std::string_view p_;
  std::string name_;
  std::string_view escaped_only_;
  size_t i_ = 0;
};

}  // namespace

Item json_char_item(Grammar& g, const CodepointSet& set, const std::string& name, std::string_view escaped_only) {
  CodepointSet norm = set;
  norm.normalize();
  CodepointSet needs_escape{{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}};
  for (char c : escaped_only) needs_escape.add(static_cast<char32_t>(c), static_cast<char32_t>(c));
  needs_escape.normalize();
  std::vector<Sequence> alts;
  const CodepointSet raw = norm.minus(needs_escape);
  if (!raw.empty()) alts.push_back(Sequence{codepoint_item(g, raw, name + "_raw")});
  const std::pair<char32_t, const char*> escapes[] = {{'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\t', "\\t"},
                                                      {'\r', "\\r"}, {'\b', "\\b"},  {'\f', "\\f"}};
  for (auto [cp, text] : escapes)
    if (norm.contains(cp)) {
      Sequence s;
      g.append_literal(s, text);
      alts.push_back(s);
    }
  for (char c : escaped_only)
    if (norm.contains(static_cast<char32_t>(c)) && std::string_view("\"\\\n\t\r\b\f").find(c) == std::string_view::npos) {
      Sequence s;
      g.append_literal(s, escape_only(std::string(1, c), escaped_only));
      alts.push_back(s);
    }
  if (alts.empty()) alts.push_back(Sequence{g.bytes(ByteSet{})});  // an empty class matches nothing
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  return Grammar::ref(g.add_rule(name, alts));
}

Item json_pattern_item(Grammar& g, std::string_view pattern, const std::string& name, std::string_view escaped_only) {
  return RegexParser(g, pattern, name, escaped_only).parse();
}

std::string escape_only(std::string json_text, std::string_view escaped_only) {
  if (escaped_only.empty()) return json_text;
  std::string out;
  for (char c : json_text) {
    if (escaped_only.find(c) == std::string_view::npos) {
      out += c;
      continue;
    }
    static const char kHex[] = "0123456789abcdef";
    out += "\\u00";
    out += kHex[(static_cast<unsigned char>(c) >> 4) & 15];
    out += kHex[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

}  // namespace sanctum::grammar

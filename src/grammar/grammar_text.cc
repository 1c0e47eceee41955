#include "grammar/grammar_text.h"

#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "base/utf8.h"
#include "grammar/codepoints.h"

namespace sanctum::grammar {

namespace {

constexpr int kMaxNesting = 100;
constexpr size_t kMaxTextBytes = 1 << 20;

class TextParser {
 public:
  TextParser(Grammar& g, std::string_view text, std::string prefix) : g_(g), s_(text), prefix_(std::move(prefix)) {}

  uint32_t parse() {
    if (s_.size() > kMaxTextBytes) throw GrammarError("size", "grammar: the text is over 1 MiB; shorten it");
    if (!utf8::is_valid(s_)) error("the grammar text is not valid UTF-8");
    skip_space(true);
    while (i_ < s_.size()) {
      const std::string name = parse_name();
      skip_space(false);
      if (!s_.substr(i_).starts_with("::=")) error("expected '::=' after rule name '" + name + "'");
      i_ += 3;
      const uint32_t r = rule_id(name);
      if (defined_.count(name)) error("rule '" + name + "' is defined twice");
      defined_[name] = true;
      g_.define(r, parse_alternatives(0));
      skip_space(true);
    }
    for (const auto& [name, id] : ids_)
      if (!defined_.count(name)) throw GrammarError("undefined rule", "grammar: rule '" + name + "' is used but never defined");
    auto root = ids_.find("root");
    if (root == ids_.end()) throw GrammarError("root", "grammar: no rule named 'root'; name the start rule root");
    return root->second;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') ++line, col = 1;
      else ++col;
    }
    throw GrammarError("syntax", "grammar: " + what + " at line " + std::to_string(line) + ", column " + std::to_string(col));
  }

  // Skips spaces and comments; newlines only when `newlines` (a rule body continues on the next line
  // unless that line starts a new rule, which parse_sequence checks).
  void skip_space(bool newlines) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }

  std::string parse_name() {
    const size_t start = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    if (i_ == start) error("expected a rule name");
    return std::string(s_.substr(start, i_ - start));
  }

  bool at_rule_start() const {
    size_t k = i_;
    while (k < s_.size() && name_char(s_[k])) ++k;
    if (k == i_) return false;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t')) ++k;
    return s_.substr(k).starts_with("::=");
  }

  uint32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const uint32_t r = g_.declare(prefix_ + name);
    ids_[name] = r;
    return r;
  }

  std::vector<Sequence> parse_alternatives(int depth) {
    if (depth > kMaxNesting) error("groups nest deeper than " + std::to_string(kMaxNesting));
    std::vector<Sequence> alts;
    alts.push_back(parse_sequence(depth));
    while (i_ < s_.size() && s_[i_] == '|') {
      ++i_;
      alts.push_back(parse_sequence(depth));
    }
    return alts;
  }

  Sequence parse_sequence(int depth) {
    Sequence seq;
    for (;;) {
      skip_space(depth > 0);
      if (depth == 0 && i_ < s_.size() && s_[i_] == '\n') {
        // A newline ends the body only when the next line starts a rule.
        skip_space(true);
        if (i_ >= s_.size() || at_rule_start() || s_[i_] == '|') return seq;
      }
      if (i_ >= s_.size() || s_[i_] == '|' || s_[i_] == ')') return seq;
      if (depth == 0 && at_rule_start()) return seq;
      Sequence primary = parse_primary(depth);
      apply_suffixes(primary, seq);
    }
  }

  Sequence parse_primary(int depth) {
    const char c = s_[i_];
    Sequence out;
    if (c == '"' || c == '\'') {
      std::string lit = parse_literal(c);
      g_.append_literal(out, lit);
      if (lit.empty()) return out;
    } else if (c == '[') {
      out.push_back(codepoint_item(g_, parse_class(), prefix_ + "class"));
    } else if (c == '.') {
      ++i_;
      out.push_back(codepoint_item(g_, CodepointSet{}.complement(), prefix_ + "any"));
    } else if (c == '(') {
      ++i_;
      auto alts = parse_alternatives(depth + 1);
      skip_space(true);
      if (i_ >= s_.size() || s_[i_] != ')') error("expected ')'");
      ++i_;
      if (alts.size() == 1) return alts[0];
      out.push_back(Grammar::ref(g_.add_rule(prefix_ + "group", alts)));
    } else if (name_char(c)) {
      out.push_back(Grammar::ref(rule_id(parse_name())));
    } else {
      error(std::string("unexpected character '") + c + "'");
    }
    return out;
  }

  // A repetition {lo, hi} (hi -1: unbounded) of a body.
  struct Repeated {
    Item body;
    int64_t lo, hi;
  };

  // (X{a,b}){c,d} as one repetition of X where the two accept the same strings, else none. Stacked
  // repetitions ("a"+++, ((x+)+)+) otherwise nest one rule per level, and a pushdown matcher keeps a
  // stack per way of splitting the input among the levels: exponentially many.
  static std::optional<std::pair<int64_t, int64_t>> fold(int64_t a, int64_t b, int64_t c, int64_t d) {
    if (a == 1 && b == 1) return std::pair{c, d};
    if (c == 1 && d == 1) return std::pair{a, b};
    if (b == -1) {                                                          // k copies of X{a,} make exactly X{k a,}
      if (c >= 1 && a * c <= 10'000) return std::pair{a * c, int64_t{-1}};  // make_repeat's largest count
      if (c == 0 && a <= 1) return std::pair{int64_t{0}, int64_t{-1}};
      return std::nullopt;
    }
    if (a == 0 && b == 1) return std::pair{int64_t{0}, d};  // (X?){c,d}: any count up to d
    if (c == 0 && d == 1 && a <= 1) return std::pair{int64_t{0}, b};
    return std::nullopt;
  }

  uint32_t make_repetition(const Item& body, int64_t lo, int64_t hi) {
    uint32_t r;
    if (lo == 0 && hi == 1) r = make_optional(g_, body, prefix_ + "opt");
    else if (lo == 0 && hi == -1) r = make_star(g_, body, prefix_ + "star");
    else if (lo == 1 && hi == -1) r = make_plus(g_, body, prefix_ + "plus");
    else r = make_repeat(g_, body, lo, hi, prefix_ + "rep");
    repeated_.emplace(r, Repeated{body, lo, hi});
    return r;
  }

  void apply_suffixes(Sequence primary, Sequence& seq) {
    for (;;) {
      if (i_ >= s_.size()) break;
      const char c = s_[i_];
      if (c != '?' && c != '*' && c != '+' && c != '{') break;
      ++i_;
      int64_t lo = c == '+' ? 1 : 0, hi = c == '?' ? 1 : -1;
      if (c == '{') {
        lo = parse_int(0), hi = lo;
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          hi = (i_ < s_.size() && s_[i_] == '}') ? -1 : parse_int(-1);
        }
        if (i_ >= s_.size() || s_[i_] != '}') error("expected '}' closing a repetition");
        ++i_;
      }
      Item body = as_item(g_, primary, prefix_ + "seq");
      // A repetition of a repetition (a group around one counts too): one repetition where it can be.
      if (body.is_rule && (hi == -1 || hi >= lo))  // bounds make_repeat would refuse stay for it to name
        if (auto it = repeated_.find(body.arg); it != repeated_.end())
          if (const auto folded = fold(it->second.lo, it->second.hi, lo, hi)) {
            body = it->second.body;
            std::tie(lo, hi) = *folded;
          }
      primary = Sequence{Grammar::ref(make_repetition(body, lo, hi))};
    }
    seq.insert(seq.end(), primary.begin(), primary.end());
  }

  int64_t parse_int(int64_t if_empty) {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
    const size_t start = i_;
    int64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      v = v * 10 + (s_[i_++] - '0');
      if (v > 1'000'000) error("repetition count too large");
    }
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
    return i_ == start ? if_empty : v;
  }

  char32_t parse_hex(int digits) {
    char32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (i_ >= s_.size()) error("truncated escape");
      const char h = s_[i_++];
      int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) error("bad hex digit in escape");
      v = v * 16 + static_cast<char32_t>(d);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) error("escape is not a Unicode scalar value");
    return v;
  }

  // One code point of a literal or class, with escapes.
  char32_t parse_char() {
    if (i_ >= s_.size()) error("unterminated literal or class");
    if (s_[i_] != '\\') return utf8::next(s_, i_);
    ++i_;
    if (i_ >= s_.size()) error("truncated escape");
    const char e = s_[i_++];
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'x': return parse_hex(2);
      case 'u': return parse_hex(4);
      case 'U': return parse_hex(8);
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/': return static_cast<char32_t>(e);
      default: error(std::string("unknown escape '\\") + e + "'");
    }
  }

  std::string parse_literal(char quote) {
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '\n') error("newline inside a literal");
      if (s_[i_] == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == 'x') {
        // \xHH is a raw byte, so a literal can hold any byte sequence.
        i_ += 2;
        out.push_back(static_cast<char>(parse_hex(2)));
        continue;
      }
      utf8::append(out, parse_char());
    }
    if (i_ >= s_.size()) error("unterminated literal");
    ++i_;
    return out;
  }

  CodepointSet parse_class() {
    ++i_;
    bool negate = false;
    if (i_ < s_.size() && s_[i_] == '^') negate = true, ++i_;
    CodepointSet set;
    while (i_ < s_.size() && s_[i_] != ']') {
      const char32_t lo = parse_char();
      char32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        hi = parse_char();
        if (hi < lo) error("class range is reversed");
      }
      set.add(lo, hi);
    }
    if (i_ >= s_.size()) error("unterminated character class");
    ++i_;
    set.normalize();
    return negate ? set.complement() : set;
  }

  Grammar& g_;
  std::string_view s_;
  std::string prefix_;
  size_t i_ = 0;
  std::map<std::string, uint32_t> ids_;
  std::map<std::string, bool> defined_;
  std::unordered_map<uint32_t, Repeated> repeated_;  // the rules make_repetition made, by id
};

}  // namespace

uint32_t add_grammar_text(Grammar& g, std::string_view text, const std::string& prefix) { return TextParser(g, text, prefix).parse(); }

std::shared_ptr<const Grammar> parse_grammar_text(std::string_view text, GrammarLimits limits) {
  auto g = std::make_shared<Grammar>(limits);
  const uint32_t root = add_grammar_text(*g, text, "");
  g->finish(root);
  return g;
}

}  // namespace sanctum::grammar

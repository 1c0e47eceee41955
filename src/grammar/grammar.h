#pragma once
// A context-free grammar over bytes: every terminal is a set of byte values, every rule a list of
// alternatives, each a sequence of terminals and rule references. The text form (grammar_text.h) and
// the JSON Schema compiler (json_schema.h) both lower to this; the matcher runs it as a pushdown
// automaton whose stack tops are always terminals.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.h"

namespace sanctum::grammar {

// A grammar we cannot build: a syntax error, an unsupported construct or a schema feature we do not
// handle. `feature` names what was refused (for a 400 that says so); the message says what to do.
class GrammarError : public Error {
 public:
  GrammarError(std::string feature, std::string message)
      : Error(ErrorKind::unsupported, std::move(message)), feature_(std::move(feature)) {}
  const std::string& feature() const { return feature_; }

 private:
  std::string feature_;
};

// 256 bits, one per byte value.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

enum class ElementKind : uint8_t { bytes, rule, end };

struct Element {
  ElementKind kind;
  uint32_t arg;  // bytes: index into Grammar::byte_sets; rule: rule id; end: the rule it closes
};

// One item of a sequence while building: a byte set or a rule reference.
struct Item {
  bool is_rule;
  uint32_t arg;
};
using Sequence = std::vector<Item>;

// A return position of a bounded repeat's optional tail (make_repeat): after the body that returns
// here, at most `remaining` more bodies may follow before the repeat is left. `chain` names the
// body's canonical chain, which has the same body with every count.
struct CountedReturn {
  uint32_t chain;
  uint32_t remaining;
};

// A chain no rule of the grammar reaches, used only to precompute a repeat's masks once for every
// count: `entry` returns from a body (none started after it yet); C_n ::= body C_n+1 | mark_n for
// n < length, C_length ::= mark_length. The marks are terminals that match no byte, so a walk that
// leaves the repeat after n more bodies stops on mark_n and the count can be read off the stack.
struct CanonicalChain {
  Item body;
  uint32_t entry;   // the return position after the first body
  uint32_t base;    // the first element of C_0; C_n starts at base + 5n
  uint32_t length;  // bodies the chain can count after the first
  // More bodies started after the first when a stack's bottom return is `pos`; -1 if not this chain's.
  int64_t inside(uint32_t pos) const {
    if (pos == entry) return 0;
    if (pos < base || pos >= base + 5 * length || (pos - base) % 5 != 1) return -1;
    return (pos - base) / 5 + 1;
  }
  // The count at which a top at `pos` left the repeat; -1 if `pos` is not one of the chain's marks.
  int64_t exit(uint32_t pos) const {
    if (pos == base + 5 * length) return length;
    if (pos < base || pos >= base + 5 * length || (pos - base) % 5 != 3) return -1;
    return (pos - base) / 5;
  }
};

// Limits that keep a hostile grammar or schema from taking unbounded time or memory to compile.
struct GrammarLimits {
  size_t max_elements = 2'000'000;
  size_t max_rules = 200'000;
};

class Grammar {
 public:
  explicit Grammar(GrammarLimits limits = {}) : limits_(limits) {}

  // Declares a rule (its alternatives come later through define); names need not be unique.
  uint32_t declare(std::string name);
  void define(uint32_t rule, const std::vector<Sequence>& alternatives);
  uint32_t add_rule(std::string name, const std::vector<Sequence>& alternatives) {
    uint32_t r = declare(std::move(name));
    define(r, alternatives);
    return r;
  }
  Item bytes(const ByteSet& set);
  Item byte(uint8_t b) {
    ByteSet s;
    s.add(b);
    return bytes(s);
  }
  static Item ref(uint32_t rule) { return Item{true, rule}; }
  void append_literal(Sequence& seq, std::string_view text);

  // Checks every declared rule is defined and none is left-recursive, then freezes the grammar.
  void finish(uint32_t root);

  uint32_t root() const { return root_; }
  size_t rule_count() const { return names_.size(); }
  const std::string& rule_name(uint32_t r) const { return names_[r]; }
  const std::vector<uint32_t>& alternatives(uint32_t r) const { return alts_[r]; }
  const Element& element(uint32_t pos) const { return elements_[pos]; }
  size_t element_count() const { return elements_.size(); }
  const ByteSet& byte_set(uint32_t i) const { return byte_sets_[i]; }
  bool nullable(uint32_t r) const { return nullable_[r]; }
  std::string describe() const;  // the lowered grammar, one rule a line (tests, debugging)
  size_t memory_bytes() const;   // about what the grammar itself holds

  // Registers the return positions (position, more bodies allowed) of a bounded repeat of `body` (a
  // rule); `longest` is its largest count. The chain is built at finish(), where positions of a
  // nullable body are dropped.
  void add_counted_repeat(Item body, const std::vector<std::pair<uint32_t, uint32_t>>& returns, uint32_t longest);
  const CountedReturn* counted_return(uint32_t pos) const {
    if (counted_.empty()) return nullptr;
    auto it = counted_.find(pos);
    return it == counted_.end() ? nullptr : &it->second;
  }
  const CanonicalChain& canonical_chain(uint32_t chain) const { return chains_[chain]; }

 private:
  uint32_t build_chain(Item body, uint32_t length);
  void build_chains();
  void check_budget() const;
  void compute_nullable();
  void reject_left_recursion() const;

  GrammarLimits limits_;
  std::vector<Element> elements_;
  std::vector<std::vector<uint32_t>> alts_;  // per rule: start position of each alternative
  std::vector<bool> defined_;
  std::vector<std::string> names_;
  std::vector<ByteSet> byte_sets_;
  std::map<std::array<uint64_t, 4>, uint32_t> byte_set_index_;
  std::vector<bool> nullable_;
  uint32_t root_ = 0;
  std::unordered_map<uint32_t, CountedReturn> counted_;
  std::vector<CanonicalChain> chains_;
  // Before finish(): per body, an index into pending_chains_ (the body and its longest count).
  std::map<std::pair<bool, uint32_t>, uint32_t> chain_of_body_;
  std::vector<std::pair<Item, uint32_t>> pending_chains_;
};

// Repetition helpers shared by the text parser and the schema compiler. `body` is one item.
uint32_t make_optional(Grammar& g, Item body, const std::string& name);
uint32_t make_star(Grammar& g, Item body, const std::string& name);
uint32_t make_plus(Grammar& g, Item body, const std::string& name);
// body{min,max}; max < 0 means unbounded. Throws GrammarError past `max_count`. A long bounded tail
// is registered as a counted repeat (Grammar::add_counted_repeat) so its masks are shared by counts.
uint32_t make_repeat(Grammar& g, Item body, int64_t min, int64_t max, const std::string& name, int64_t max_count = 10'000);
// Wraps a sequence as one item (a rule with one alternative), or returns its only item.
Item as_item(Grammar& g, const Sequence& seq, const std::string& name);

}  // namespace sanctum::grammar

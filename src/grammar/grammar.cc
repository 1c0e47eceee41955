#include "grammar/grammar.h"

#include <algorithm>

namespace sanctum::grammar {

namespace {
// Canonical chains count at most this many bodies after the first: a token longer than that (in
// bytes, each body taking one at least) is walked against its real stack instead.
constexpr uint32_t kCanonicalLength = 256;
// Bounded tails at least this long are counted repeats; shorter ones cost little per count.
constexpr int64_t kCountedRepeatMin = 8;
}  // namespace

uint32_t Grammar::declare(std::string name) {
  names_.push_back(std::move(name));
  alts_.emplace_back();
  defined_.push_back(false);
  check_budget();
  return static_cast<uint32_t>(names_.size() - 1);
}

void Grammar::define(uint32_t rule, const std::vector<Sequence>& alternatives) {
  SANCTUM_CHECK(rule < names_.size() && !defined_[rule], ErrorKind::internal, "grammar: rule defined twice");
  defined_[rule] = true;
  for (const Sequence& seq : alternatives) {
    alts_[rule].push_back(static_cast<uint32_t>(elements_.size()));
    for (const Item& item : seq) elements_.push_back(Element{item.is_rule ? ElementKind::rule : ElementKind::bytes, item.arg});
    elements_.push_back(Element{ElementKind::end, rule});
  }
  check_budget();
}

void Grammar::check_budget() const {
  if (elements_.size() > limits_.max_elements || names_.size() > limits_.max_rules)
    throw GrammarError("size", "grammar: the compiled grammar passes " + std::to_string(limits_.max_elements) + " elements or " +
                                   std::to_string(limits_.max_rules) +
                                   " rules; simplify it (fewer or smaller enums, repetition counts, nesting)");
}

Item Grammar::bytes(const ByteSet& set) {
  auto [it, inserted] = byte_set_index_.try_emplace(set.bits, static_cast<uint32_t>(byte_sets_.size()));
  if (inserted) byte_sets_.push_back(set);
  return Item{false, it->second};
}

void Grammar::append_literal(Sequence& seq, std::string_view text) {
  for (char c : text) seq.push_back(byte(static_cast<uint8_t>(c)));
}

void Grammar::compute_nullable() {
  nullable_.assign(names_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < names_.size(); ++r) {
      if (nullable_[r]) continue;
      for (uint32_t pos : alts_[r]) {
        bool all = true;
        for (; elements_[pos].kind != ElementKind::end; ++pos) {
          const Element& e = elements_[pos];
          if (e.kind == ElementKind::bytes || !nullable_[e.arg]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable_[r] = changed = true;
          break;
        }
      }
    }
  }
}

// A rule reachable from itself without consuming a byte would make the matcher expand forever.
void Grammar::reject_left_recursion() const {
  const size_t n = names_.size();
  std::vector<std::vector<uint32_t>> left(n);
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t pos : alts_[r])
      for (; elements_[pos].kind == ElementKind::rule; ++pos) {
        left[r].push_back(elements_[pos].arg);
        if (!nullable_[elements_[pos].arg]) break;
      }
  std::vector<uint8_t> state(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> stack;
  for (uint32_t start = 0; start < n; ++start) {
    if (state[start]) continue;
    stack.push_back({start, 0});
    state[start] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == left[r].size()) {
        state[r] = 2;
        stack.pop_back();
        continue;
      }
      uint32_t next = left[r][i++];
      if (state[next] == 1)
        throw GrammarError("left recursion",
                           "grammar: rule '" + names_[next] + "' is left-recursive; write `a ::= b (c)*` instead of `a ::= a c | b`");
      if (state[next] == 0) {
        state[next] = 1;
        stack.push_back({next, 0});
      }
    }
  }
}

void Grammar::finish(uint32_t root) {
  for (uint32_t r = 0; r < names_.size(); ++r)
    if (!defined_[r]) throw GrammarError("undefined rule", "grammar: rule '" + names_[r] + "' is used but never defined");
  root_ = root;
  build_chains();
  compute_nullable();
  reject_left_recursion();
  // An empty body would let a token pass any number of counts: such repeats keep per-count masks.
  std::erase_if(counted_, [&](const auto& entry) {
    const Item body = chains_[entry.second.chain].body;
    return body.is_rule && nullable_[body.arg];
  });
}

uint32_t Grammar::build_chain(Item body, uint32_t length) {
  std::vector<uint32_t> c(length + 1);
  for (uint32_t& r : c) r = declare("counted_chain");
  const Item mark = bytes(ByteSet{});
  for (uint32_t n = 0; n < length; ++n) define(c[n], {{body, ref(c[n + 1])}, {mark}});
  define(c[length], {{mark}});
  const uint32_t entry = add_rule("counted_entry", {{body, ref(c[0])}});
  const CanonicalChain chain{body, alts_[entry][0] + 1, alts_[c[0]][0], length};
  SANCTUM_CHECK(chain.exit(alts_[c[length]][0]) == length && chain.inside(alts_[c[length - 1]][0] + 1) == length, ErrorKind::internal,
                "grammar: canonical chain layout");
  chains_.push_back(chain);
  return static_cast<uint32_t>(chains_.size() - 1);
}

void Grammar::add_counted_repeat(Item body, const std::vector<std::pair<uint32_t, uint32_t>>& returns, uint32_t longest) {
  // The chain is built at finish(), once per body and as long as the body's longest repeat, so that
  // every repeat of one body (the bounded strings of a schema share their character rule) shares
  // one chain and so one set of repeat profiles. Until then `chain` is the body's pending index.
  const auto key = std::make_pair(body.is_rule, body.arg);
  auto [it, inserted] = chain_of_body_.try_emplace(key, static_cast<uint32_t>(pending_chains_.size()));
  if (inserted) pending_chains_.push_back({body, 0});
  uint32_t& length = pending_chains_[it->second].second;
  length = std::max(length, std::clamp<uint32_t>(longest, 1, kCanonicalLength));
  for (auto [pos, remaining] : returns) counted_[pos] = CountedReturn{it->second, remaining};
}

void Grammar::build_chains() {
  constexpr uint32_t kNone = 0xFFFFFFFF;
  std::vector<uint32_t> chain_of(pending_chains_.size(), kNone);
  for (size_t i = 0; i < pending_chains_.size(); ++i) {
    const auto [body, length] = pending_chains_[i];
    // Past the size budget the repeat stays a plain chain of rules (same language, per-count masks).
    if (elements_.size() + 5 * (size_t{length} + 2) > limits_.max_elements || names_.size() + length + 2 > limits_.max_rules) continue;
    chain_of[i] = build_chain(body, length);
  }
  std::erase_if(counted_, [&](const auto& entry) { return chain_of[entry.second.chain] == kNone; });
  for (auto& [pos, counted] : counted_) counted.chain = chain_of[counted.chain];
  pending_chains_.clear();
  chain_of_body_.clear();
}

size_t Grammar::memory_bytes() const {
  size_t n = elements_.capacity() * sizeof(Element) + byte_sets_.capacity() * sizeof(ByteSet) + nullable_.capacity() / 8 +
             chains_.capacity() * sizeof(CanonicalChain) + counted_.size() * (sizeof(CountedReturn) + 2 * sizeof(void*) + 8);
  for (size_t r = 0; r < names_.size(); ++r)
    n += sizeof(std::string) + names_[r].capacity() + sizeof(std::vector<uint32_t>) + alts_[r].capacity() * sizeof(uint32_t);
  return n + byte_set_index_.size() * (sizeof(ByteSet) + 48);  // a map node per byte set
}

std::string Grammar::describe() const {
  std::string out;
  for (uint32_t r = 0; r < names_.size(); ++r) {
    out += names_[r] + " ::=";
    for (size_t a = 0; a < alts_[r].size(); ++a) {
      out += a ? " |" : "";
      for (uint32_t pos = alts_[r][a]; elements_[pos].kind != ElementKind::end; ++pos) {
        const Element& e = elements_[pos];
        if (e.kind == ElementKind::rule) {
          out += " " + names_[e.arg];
          continue;
        }
        const ByteSet& s = byte_sets_[e.arg];
        int count = 0, only = 0;
        for (int b = 0; b < 256; ++b)
          if (s.has(static_cast<uint8_t>(b))) ++count, only = b;
        char buf[32];
        if (count == 1 && only >= 0x20 && only < 0x7f) snprintf(buf, sizeof buf, " '%c'", only);
        else snprintf(buf, sizeof buf, " [%d bytes]", count);
        out += buf;
      }
    }
    out += "\n";
  }
  return out;
}

uint32_t make_optional(Grammar& g, Item body, const std::string& name) { return g.add_rule(name, {{body}, {}}); }

uint32_t make_star(Grammar& g, Item body, const std::string& name) {
  uint32_t r = g.declare(name);
  g.define(r, {{body, Grammar::ref(r)}, {}});
  return r;
}

uint32_t make_plus(Grammar& g, Item body, const std::string& name) {
  uint32_t star = make_star(g, body, name + "_star");
  return g.add_rule(name, {{body, Grammar::ref(star)}});
}

uint32_t make_repeat(Grammar& g, Item body, int64_t min, int64_t max, const std::string& name, int64_t max_count) {
  if (min < 0 || (max >= 0 && max < min))
    throw GrammarError("repetition",
                       "grammar: repetition {" + std::to_string(min) + "," + std::to_string(max) + "} is empty; use min <= max");
  if (min > max_count || max > max_count)
    throw GrammarError("repetition", "grammar: repetition count " + std::to_string(std::max(min, max)) + " is above the limit " +
                                         std::to_string(max_count) + "; lower it");
  // The optional tail nests, (x (x (x)?)?)?, so a string of n copies has one parse.
  Sequence seq;
  const bool counted = max >= 0 && max - min >= kCountedRepeatMin;
  // A counted body is a rule, so that the stack shows the count below it (a lone terminal would be
  // a different top for every count).
  if (counted && !body.is_rule) body = Grammar::ref(g.add_rule(name + "_item", {{body}}));
  for (int64_t i = 0; i < min; ++i) seq.push_back(body);
  if (max < 0) {
    seq.push_back(Grammar::ref(make_star(g, body, name + "_star")));
  } else if (counted) {
    // R_j ::= body R_j-1 | (empty), ending in an empty R_0 so that every body of the tail returns to
    // a position of its own: after the body of R_j, j - 1 more may follow.
    uint32_t tail = g.add_rule(name + "_end", {{}});
    std::vector<std::pair<uint32_t, uint32_t>> returns;
    for (int64_t j = 1; j <= max - min; ++j) {
      tail = g.add_rule(name + "_opt", {{body, Grammar::ref(tail)}, {}});
      returns.push_back({g.alternatives(tail)[0] + 1, static_cast<uint32_t>(j - 1)});
    }
    seq.push_back(Grammar::ref(tail));
    const uint32_t rule = g.add_rule(name, {seq});
    // The last required body returns to the tail's reference: all of the tail may follow.
    if (min > 0) returns.push_back({g.alternatives(rule)[0] + static_cast<uint32_t>(min), static_cast<uint32_t>(max - min)});
    g.add_counted_repeat(body, returns, static_cast<uint32_t>(max - min));
    return rule;
  } else if (max > min) {
    uint32_t tail = g.add_rule(name + "_opt", {{body}, {}});
    for (int64_t i = min + 1; i < max; ++i) tail = g.add_rule(name + "_opt", {{body, Grammar::ref(tail)}, {}});
    seq.push_back(Grammar::ref(tail));
  }
  return g.add_rule(name, {seq});
}

Item as_item(Grammar& g, const Sequence& seq, const std::string& name) {
  if (seq.size() == 1) return seq[0];
  return Grammar::ref(g.add_rule(name, {seq}));
}

}  // namespace sanctum::grammar

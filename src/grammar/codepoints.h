#pragma once
// Sets of Unicode code points (char classes, JSON string characters) and their lowering to byte
// sequences: a grammar over bytes matches a code point class as alternatives of UTF-8 byte ranges.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace sanctum::grammar {

struct CodepointSet {
  std::vector<std::pair<char32_t, char32_t>> ranges;  // inclusive; sorted and merged by normalize()

  void add(char32_t lo, char32_t hi) { ranges.push_back({lo, hi}); }
  void add(const CodepointSet& other) { ranges.insert(ranges.end(), other.ranges.begin(), other.ranges.end()); }
  void normalize();
  // Every scalar value (surrogates excluded) not in this set.
  CodepointSet complement() const;
  CodepointSet minus(const CodepointSet& other) const;
  bool empty() const { return ranges.empty(); }
  bool contains(char32_t c) const;
};

// One alternative per UTF-8 byte-range sequence covering [lo, hi] (surrogates must be excluded).
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(char32_t lo, char32_t hi);

// A rule matching exactly one code point of `set` as UTF-8 (an empty set gives a rule that never matches).
Item codepoint_item(Grammar& g, CodepointSet set, const std::string& name);

}  // namespace sanctum::grammar

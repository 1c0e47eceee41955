#include "grammar/codepoints.h"

#include <algorithm>

namespace sanctum::grammar {

namespace {

constexpr char32_t kMaxCodepoint = 0x10FFFF;

int encode(char32_t c, uint8_t* out) {
  if (c < 0x80) {
    out[0] = static_cast<uint8_t>(c);
    return 1;
  }
  if (c < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (c >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (c >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (c >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((c >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (c & 0x3F));
  return 4;
}

void split(char32_t lo, char32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  if (lo > hi) return;
  // Split where the encoded length changes.
  for (char32_t edge : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
    if (lo <= edge && hi > edge) {
      split(lo, edge, out);
      split(edge + 1, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  const int n = encode(lo, a);
  // Split until every byte position is an independent range: the low 6*i bits span a whole block.
  for (int i = 1; i < n; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  encode(hi, b);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

void CodepointSet::normalize() {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (auto [lo, hi] : ranges) {
    if (lo > hi) continue;
    if (!merged.empty() && lo <= merged.back().second + 1) merged.back().second = std::max(merged.back().second, hi);
    else merged.push_back({lo, hi});
  }
  ranges = std::move(merged);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet s = *this;
  s.add(0xD800, 0xDFFF);  // surrogates are never characters
  s.normalize();
  CodepointSet out;
  char32_t next = 0;
  for (auto [lo, hi] : s.ranges) {
    if (lo > next) out.add(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.add(next, kMaxCodepoint);
  return out;
}

CodepointSet CodepointSet::minus(const CodepointSet& other) const {
  CodepointSet keep = other.complement();
  CodepointSet self = *this;
  self.normalize();
  CodepointSet out;
  for (auto [a, b] : self.ranges)
    for (auto [c, d] : keep.ranges) {
      char32_t lo = std::max(a, c), hi = std::min(b, d);
      if (lo <= hi) out.add(lo, hi);
    }
  out.normalize();
  return out;
}

bool CodepointSet::contains(char32_t c) const {
  for (auto [lo, hi] : ranges)
    if (c >= lo && c <= hi) return true;
  return false;
}

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(char32_t lo, char32_t hi) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> out;
  split(lo, hi, out);
  return out;
}

Item codepoint_item(Grammar& g, CodepointSet set, const std::string& name) {
  // Drop surrogates and anything past U+10FFFF.
  set = set.minus(CodepointSet{{{0xD800, 0xDFFF}}});
  ByteSet ascii;
  bool any_ascii = false;
  std::vector<Sequence> alts;
  for (auto [lo, hi] : set.ranges) {
    hi = std::min(hi, kMaxCodepoint);
    for (const auto& seq : utf8_sequences(lo, hi)) {
      if (seq.size() == 1) {
        ascii.add_range(seq[0].first, seq[0].second);
        any_ascii = true;
        continue;
      }
      Sequence s;
      for (auto [a, b] : seq) {
        ByteSet bs;
        bs.add_range(a, b);
        s.push_back(g.bytes(bs));
      }
      alts.push_back(std::move(s));
    }
  }
  if (any_ascii && alts.empty()) return g.bytes(ascii);
  if (any_ascii) alts.insert(alts.begin(), Sequence{g.bytes(ascii)});
  if (alts.empty()) alts.push_back(Sequence{g.bytes(ByteSet{})});  // matches nothing
  return Grammar::ref(g.add_rule(name, alts));
}

}  // namespace sanctum::grammar

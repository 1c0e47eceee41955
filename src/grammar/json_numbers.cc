#include "grammar/json_numbers.h"

#include <cmath>
#include <string>

namespace sanctum::grammar {

namespace {

constexpr double kMaxBound = 1e15;  // integers up to here are exact in a double

Item digit_range(Grammar& g, char lo, char hi) {
  ByteSet s;
  s.add_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
  return g.bytes(s);
}

// Alternatives for decimal strings of equal length between lo and hi (inclusive, lo <= hi).
void same_length(Grammar& g, const std::string& lo, const std::string& hi, Sequence prefix, std::vector<Sequence>& out) {
  if (lo.empty()) {
    out.push_back(std::move(prefix));
    return;
  }
  if (lo[0] == hi[0]) {
    prefix.push_back(g.byte(static_cast<uint8_t>(lo[0])));
    same_length(g, lo.substr(1), hi.substr(1), std::move(prefix), out);
    return;
  }
  const size_t rest = lo.size() - 1;
  const std::string zeros(rest, '0'), nines(rest, '9');
  // Whole blocks need no split: [lo0-hi0][0-9]^rest.
  const bool lo_full = lo.substr(1) == zeros, hi_full = hi.substr(1) == nines;
  char mid_lo = static_cast<char>(lo[0] + (lo_full ? 0 : 1)), mid_hi = static_cast<char>(hi[0] - (hi_full ? 0 : 1));
  if (!lo_full) {
    Sequence p = prefix;
    p.push_back(g.byte(static_cast<uint8_t>(lo[0])));
    same_length(g, lo.substr(1), nines, std::move(p), out);
  }
  if (mid_lo <= mid_hi) {
    Sequence p = prefix;
    p.push_back(digit_range(g, mid_lo, mid_hi));
    for (size_t k = 0; k < rest; ++k) p.push_back(digit_range(g, '0', '9'));
    out.push_back(std::move(p));
  }
  if (!hi_full) {
    Sequence p = prefix;
    p.push_back(g.byte(static_cast<uint8_t>(hi[0])));
    same_length(g, zeros, hi.substr(1), std::move(p), out);
  }
}

// Non-negative integers in [lo, hi] without leading zeros; hi < 0 means unbounded.
void nonneg_range(Grammar& g, int64_t lo, int64_t hi, Sequence prefix, std::vector<Sequence>& out, const std::string& name) {
  const std::string lo_s = std::to_string(lo);
  const size_t max_len = hi < 0 ? lo_s.size() : std::to_string(hi).size();
  for (size_t len = lo_s.size(); len <= max_len; ++len) {
    const int64_t first = len == 1 ? 0 : static_cast<int64_t>(std::pow(10.0, static_cast<double>(len - 1)));
    const int64_t last = static_cast<int64_t>(std::pow(10.0, static_cast<double>(len))) - 1;
    const int64_t a = std::max(lo, first), b = hi < 0 ? last : std::min(hi, last);
    if (a <= b) same_length(g, std::to_string(a), std::to_string(b), prefix, out);
  }
  if (hi < 0) {
    // Every integer with more digits than lo is above it.
    Sequence p = prefix;
    p.push_back(digit_range(g, '1', '9'));
    const Item digit = digit_range(g, '0', '9');
    p.push_back(Grammar::ref(make_repeat(g, digit, static_cast<int64_t>(lo_s.size()), -1, name + "_digits")));
    out.push_back(std::move(p));
  }
}

struct IntRange {
  std::optional<int64_t> lo, hi;
};

IntRange integer_range(const NumberBounds& b, bool shrink_for_fraction) {
  IntRange r;
  if (b.minimum) {
    if (std::fabs(*b.minimum) > kMaxBound)
      throw GrammarError("minimum", "json schema: minimum " + std::to_string(*b.minimum) + " is beyond 1e15; drop it");
    double lo = b.exclusive_minimum ? std::floor(*b.minimum) + 1 : std::ceil(*b.minimum);
    r.lo = static_cast<int64_t>(lo);
  }
  if (b.maximum) {
    if (std::fabs(*b.maximum) > kMaxBound)
      throw GrammarError("maximum", "json schema: maximum " + std::to_string(*b.maximum) + " is beyond 1e15; drop it");
    double hi = b.exclusive_maximum ? std::ceil(*b.maximum) - 1 : std::floor(*b.maximum);
    if (shrink_for_fraction) hi = std::floor(*b.maximum - 1);
    r.hi = static_cast<int64_t>(hi);
  }
  return r;
}

// Integers in r as alternatives (appended to out); false when the range is empty.
bool integer_alts(Grammar& g, IntRange r, std::vector<Sequence>& out, const std::string& name) {
  if (r.lo && r.hi && *r.lo > *r.hi) return false;
  // Negative part: "-" then |n| in [max(1, -hi), -lo].
  if (!r.lo || *r.lo < 0) {
    const int64_t abs_lo = r.hi && *r.hi < 0 ? -*r.hi : 1;
    const int64_t abs_hi = r.lo ? -*r.lo : -1;
    Sequence minus;
    g.append_literal(minus, "-");
    nonneg_range(g, abs_lo, abs_hi, minus, out, name);
  }
  if (!r.hi || *r.hi >= 0) nonneg_range(g, r.lo ? std::max<int64_t>(*r.lo, 0) : 0, r.hi ? *r.hi : -1, {}, out, name);
  return true;
}

Item fraction(Grammar& g, const std::string& name) {
  Sequence s;
  g.append_literal(s, ".");
  s.push_back(Grammar::ref(make_plus(g, digit_range(g, '0', '9'), name + "_frac_digits")));
  return Grammar::ref(make_optional(g, as_item(g, s, name + "_frac"), name + "_frac_opt"));
}

}  // namespace

Item json_integer_item(Grammar& g, const NumberBounds& bounds, const std::string& name) {
  std::vector<Sequence> alts;
  if (!integer_alts(g, integer_range(bounds, false), alts, name))
    throw GrammarError("minimum", "json schema: integer bounds at " + name + " admit no value; fix minimum/maximum");
  return Grammar::ref(g.add_rule(name, alts));
}

Item json_number_item(Grammar& g, const NumberBounds& bounds, const std::string& name) {
  if (!bounds.minimum && !bounds.maximum) {
    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?
    std::vector<Sequence> int_alts;
    integer_alts(g, IntRange{}, int_alts, name + "_int");
    Sequence s{Grammar::ref(g.add_rule(name + "_int", int_alts)), fraction(g, name)};
    Sequence exp;
    ByteSet e, sign;
    e.add('e'), e.add('E'), sign.add('-'), sign.add('+');
    exp.push_back(g.bytes(e));
    exp.push_back(Grammar::ref(make_optional(g, g.bytes(sign), name + "_sign")));
    exp.push_back(Grammar::ref(make_plus(g, digit_range(g, '0', '9'), name + "_exp_digits")));
    s.push_back(Grammar::ref(make_optional(g, as_item(g, exp, name + "_exp"), name + "_exp_opt")));
    return as_item(g, s, name);
  }
  // Bounded: whole numbers in range, plus n.ddd for n >= 0 with n + 1 <= max (and n >= min), so the
  // fraction never leaves the range; negative numbers carry no fraction.
  std::vector<Sequence> alts;
  const IntRange whole = integer_range(bounds, false);
  integer_alts(g, whole, alts, name + "_whole");
  IntRange frac_range = integer_range(bounds, bounds.maximum.has_value());
  frac_range.lo = std::max<int64_t>(frac_range.lo.value_or(0), 0);
  std::vector<Sequence> frac_alts;
  if (integer_alts(g, frac_range, frac_alts, name + "_fracint") && !frac_alts.empty()) {
    Sequence s{Grammar::ref(g.add_rule(name + "_fracint", frac_alts))};
    g.append_literal(s, ".");
    s.push_back(Grammar::ref(make_plus(g, digit_range(g, '0', '9'), name + "_frac_digits")));
    alts.push_back(s);
  }
  if (alts.empty()) throw GrammarError("minimum", "json schema: number bounds at " + name + " admit no value; fix minimum/maximum");
  return Grammar::ref(g.add_rule(name, alts));
}

}  // namespace sanctum::grammar

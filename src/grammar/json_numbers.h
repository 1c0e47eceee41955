#pragma once
// JSON numbers as grammar items, with optional bounds: integers in [lo, hi] exactly, and bounded
// numbers as the subset "an integer part in range, then a fraction that cannot leave the range".
#include <optional>

#include "grammar/grammar.h"

namespace sanctum::grammar {

struct NumberBounds {
  std::optional<double> minimum, maximum;  // inclusive
  bool exclusive_minimum = false, exclusive_maximum = false;
};

// Throws GrammarError when the bounds admit no value or pass 1e15.
Item json_integer_item(Grammar& g, const NumberBounds& bounds, const std::string& name);
Item json_number_item(Grammar& g, const NumberBounds& bounds, const std::string& name);

}  // namespace sanctum::grammar

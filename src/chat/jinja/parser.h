#pragma once
// Parser for the Jinja subset chat templates use: if/elif/else, for (with else, filters, loop controls),
// set (plain, tuple, namespace attribute, block), macro, filter blocks, generation blocks, raw;
// the full expression grammar with filters, tests, slices, calls and keyword arguments.
#include <string_view>

#include "chat/jinja/ast.h"

namespace sanctum::jinja {

// Throws Error(invalid_input) "chat template: line N: ..." on syntax errors and unknown filters/tests.
Body parse_template(std::string_view source);

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

}  // namespace sanctum::jinja

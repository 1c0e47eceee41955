// libFuzzer: arbitrary bytes as a grammar text (even-length inputs) or a JSON Schema (odd-length),
// compiled and walked a few steps on a small vocabulary. Bad input must raise sanctum::Error (a
// GrammarError naming the feature), never crash or hang; the compile limits bound time and memory.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/compile.h"
#include "grammar/grammar_text.h"
#include "grammar/matcher.h"

namespace {

std::shared_ptr<const sanctum::grammar::Vocabulary> vocab() {
  static const auto v =
      std::make_shared<const sanctum::grammar::Vocabulary>(std::vector<std::string>{"<eos>", "{", "}", "\"", "a", "1", ",", ":", " ", "[",
                                                                                    "]", "true", "null", "\xc3\xa9", "\":", "\"a\"", "-",
                                                                                    ".", "e"},
                                                           std::vector<int32_t>{0});
  return v;
}

void walk(const sanctum::grammar::CompiledGrammar& compiled) {
  sanctum::grammar::GrammarMatcher m(compiled);
  std::vector<uint32_t> mask(compiled.vocab().mask_words());
  for (int step = 0; step < 16 && !m.is_terminated(); ++step) {
    m.fill_mask(mask);
    int32_t pick = -1;
    for (size_t id = 0; id < compiled.vocab().size(); ++id)
      if (mask[id / 32] >> (id % 32) & 1) pick = static_cast<int32_t>(id);
    if (pick < 0) return;
    if (!m.accept(pick)) abort();  // a token the mask allows must be accepted
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sanctum::grammar::GrammarLimits limits;
  limits.max_elements = 200'000;
  limits.max_rules = 50'000;
  try {
    if (size % 2 == 0) {
      walk(sanctum::grammar::CompiledGrammar(sanctum::grammar::parse_grammar_text(text, limits), vocab()));
    } else {
      const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
      if (schema.is_discarded()) return 0;
      sanctum::grammar::JsonGrammarOptions options;
      options.limits = limits;
      options.max_repeat = 200;
      walk(sanctum::grammar::compile_json_schema(schema, vocab(), options));
    }
  } catch (const sanctum::Error&) {
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}

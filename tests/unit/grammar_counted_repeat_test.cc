// Bounded repeats (maxLength / minLength strings, minItems / maxItems arrays, x{m,n}) share their
// masks across counts through repeat profiles; every step's mask must still equal a scalar walk of
// every token, and the repeat must still accept exactly its counts. Bounds run from below the
// longest token to past the canonical chain's length, nested and not.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar_text.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar_reference.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::grammar {
namespace {

std::shared_ptr<const Grammar> schema(const std::string& text) { return json_schema_grammar(SchemaJson::parse(text)); }

// Walks `steps` tokens picked from the reference mask, mostly tokens without JSON punctuation so the
// walk runs through a repeat's counts, and checks every step's mask; then replays the walk on a
// fresh matcher of a second compiled grammar (masks computed in another order).
void check_walks(const std::shared_ptr<const Grammar>& grammar, const std::shared_ptr<const Vocabulary>& vocab, size_t steps,
                 const std::string& label, int seeds = 2) {
  for (int seed = 1; seed <= seeds; ++seed) {
    const CompiledGrammar compiled(grammar, vocab,
                                   MaskBudget{.state_bytes = 0});  // no whole-state cache: every step combines context masks
    ScalarReference reference(*grammar);
    GrammarMatcher matcher(compiled);
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<uint32_t> mask(vocab->mask_words());
    for (size_t step = 0; step < steps; ++step) {
      const std::vector<uint32_t> want = reference.mask(*vocab);
      matcher.fill_mask(mask);
      ASSERT_EQ(mask_diff(mask, want, *vocab), "") << label << " seed " << seed << " step " << step;
      std::vector<int32_t> allowed, plain;
      for (int32_t id = 0; static_cast<size_t>(id) < vocab->size(); ++id) {
        if (!(want[static_cast<size_t>(id) / 32] >> (id % 32) & 1)) continue;
        allowed.push_back(id);
        if (vocab->bytes(id).find_first_of("\",:{}[]") == std::string::npos) plain.push_back(id);
      }
      if (allowed.empty()) break;
      const int32_t token = !plain.empty() && rng() % 8 ? plain[rng() % plain.size()] : allowed[rng() % allowed.size()];
      ASSERT_TRUE(matcher.accept(token)) << label << " step " << step;
      if (vocab->is_eos(token)) break;
      ASSERT_TRUE(reference.accept(vocab->bytes(token)));
    }
  }
}

TEST(GrammarCountedRepeat, bounded_strings_mask_every_count_as_a_scalar_walk) {
  const auto vocab = qwen3_vocab();
  // Bounds below, around and above the longest token (128 bytes) and the canonical chain (256).
  for (const char* s : {R"({"type": "string", "maxLength": 9})", R"({"type": "string", "minLength": 3, "maxLength": 20})",
                        R"({"type": "string", "minLength": 12, "maxLength": 40})", R"({"type": "string", "maxLength": 150})",
                        R"({"type": "string", "minLength": 1, "maxLength": 300})"})
    check_walks(schema(s), vocab, 48, s);
}

TEST(GrammarCountedRepeat, bounded_arrays_and_nested_repeats_mask_as_a_scalar_walk) {
  const auto vocab = qwen3_vocab();
  for (const char* s : {R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 30})",
                        R"({"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 10}, "maxItems": 12})",
                        R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "maxLength": 30},
                            "minItems": 3, "maxItems": 9}, "b": {"type": "string", "maxLength": 60}}, "required": ["a", "b"]})"})
    check_walks(schema(s), vocab, 60, s);
}

TEST(GrammarCountedRepeat, plain_grammar_repeats_mask_as_a_scalar_walk) {
  const auto vocab = qwen3_vocab();
  // At the root (the repeat ends the grammar), after a mandatory part, nested, and over a class
  // body that is a single terminal.
  for (const char* g : {R"g(root ::= [a-z ]{0,50})g", R"g(root ::= "x" [a-z0-9]{3,40} "y" [0-9]{2})g",
                        R"g(root ::= ("ab"{1,9} ","){2,12} ".")g", R"g(root ::= ("(" [a-c]{0,20} ")"){0,10} "!")g"})
    check_walks(parse_grammar_text(g), vocab, 48, g);
}

TEST(GrammarCountedRepeat, tokens_longer_than_the_canonical_chain_are_masked_exactly) {
  // Runs of 'a' up to 300 bytes: longer than the 256 counts a canonical chain holds, so a bound of
  // 400 leaves tokens that pass the chain's last count to the real walk.
  std::vector<std::string> tokens = {"\"", "\",", "a\"", "b", "\\n", "é", "a\"}"};
  for (size_t n = 1; n <= 300; n += n < 20 ? 1 : 37) tokens.push_back(std::string(n, 'a'));
  tokens.push_back(std::string(299, 'a') + "\"");
  tokens.push_back("");  // an end token
  const auto vocab = std::make_shared<const Vocabulary>(tokens, std::vector<int32_t>{static_cast<int32_t>(tokens.size() - 1)});
  for (const char* s : {R"({"type": "string", "maxLength": 400})", R"({"type": "string", "minLength": 250, "maxLength": 290})",
                        R"({"type": "string", "maxLength": 255})", R"({"type": "string", "maxLength": 257})"})
    check_walks(schema(s), vocab, 40, s, 4);
}

TEST(GrammarCountedRepeat, a_bounded_string_accepts_exactly_its_lengths) {
  const auto vocab = qwen3_vocab();
  for (auto [min, max] : {std::pair{0, 9}, std::pair{3, 20}, std::pair{12, 40}, std::pair{1, 300}}) {
    const CompiledGrammar compiled(schema(R"({"type": "string", "minLength": )" + std::to_string(min) + R"(, "maxLength": )" +
                                          std::to_string(max) + "}"),
                                   vocab);
    // One- and two-byte characters and an escape: each counts as one.
    for (const std::string ch : {"a", "\xc3\xa9", "\\n"})
      for (int n = 0; n <= max + 2; ++n) {
        std::string text = "\"";
        for (int i = 0; i < n; ++i) text += ch;
        text += "\"";
        GrammarMatcher m(compiled);
        const bool ok = m.accept_bytes(text) && m.can_end();
        EXPECT_EQ(ok, n >= min && n <= max) << "length " << n << " of '" << ch << "' in [" << min << ", " << max << "]";
      }
  }
}

TEST(GrammarCountedRepeat, profiles_replace_per_count_masks) {
  // A 600-character bound: without profiles each count walked the vocabulary again.
  const auto vocab = qwen3_vocab();
  const CompiledGrammar compiled(schema(R"({"type": "string", "maxLength": 600})"), vocab, MaskBudget{.state_bytes = 0});
  GrammarMatcher m(compiled);
  std::vector<uint32_t> mask(vocab->mask_words());
  ASSERT_TRUE(m.accept_bytes("\""));
  m.fill_mask(mask);
  const size_t masks_after_first = compiled.stats().masks_computed;
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(m.accept_bytes("ab"));
    m.fill_mask(mask);
  }
  const CompileStats stats = compiled.stats();
  EXPECT_GT(stats.repeat_profiles, 0u);
  // One small mask per count for each top (the profile holds the shared part), not a walk each.
  EXPECT_LT(stats.mask_bytes, size_t{2} << 20) << stats.masks_computed << " masks after " << masks_after_first;
}

}  // namespace
}  // namespace sanctum::grammar

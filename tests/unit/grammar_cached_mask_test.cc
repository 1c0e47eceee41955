// The matcher's mask (cached context masks combined per step, and whole states served from the
// state cache) equals a scalar reference at every step of seeded random walks over real schemas and
// the real Qwen3 vocabulary: for each token, walk its bytes through a plain stack machine. The walks
// run twice on fresh matchers, so the second pass is answered from the state cache, and again under
// a budget small enough to evict.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "grammar/grammar_text.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/stack_machine.h"
#include "grammar_reference.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::grammar {
namespace {

const std::string kData = SANCTUM_TEST_DATA_DIR;

// Enums, arrays, patterns, numeric bounds, oneOf, shared definitions and a recursive schema.
constexpr const char* kSchemas[] = {"JsonSchemaStore--component.json",    "Github_medium--o34384.json",
                                    "Github_medium--o5147.json",          "Github_medium--o60973.json",
                                    "Kubernetes--kb_343_Normalized.json", "Snowplow--sp_362_Normalized.json",
                                    "Github_medium--o82305.json"};
constexpr size_t kMaxSteps = 40;

struct Walk {
  std::vector<int32_t> tokens;
  std::vector<std::vector<uint32_t>> masks;  // the reference mask before each token
};

// Picks each token from the reference mask and checks the matcher's mask against it.
Walk checked_walk(const CompiledGrammar& compiled, uint32_t seed, const std::string& label) {
  const Vocabulary& vocab = compiled.vocab();
  ScalarReference reference(compiled.grammar());
  GrammarMatcher matcher(compiled);
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(vocab.mask_words());
  Walk walk;
  for (size_t step = 0; step < kMaxSteps; ++step) {
    walk.masks.push_back(reference.mask(vocab));
    matcher.fill_mask(mask);
    EXPECT_EQ(mask_diff(mask, walk.masks.back(), vocab), "") << label << " seed " << seed << " step " << step;
    // Half the time a token with JSON punctuation: walks leave long strings and visit nested values.
    std::vector<int32_t> allowed, structural;
    for (int32_t id = 0; static_cast<size_t>(id) < vocab.size(); ++id) {
      if (!(walk.masks.back()[static_cast<size_t>(id) / 32] >> (id % 32) & 1)) continue;
      allowed.push_back(id);
      if (vocab.bytes(id).find_first_of("\",:{}[]") != std::string::npos) structural.push_back(id);
    }
    if (allowed.empty()) break;
    const int32_t token = !structural.empty() && rng() % 2 ? structural[rng() % structural.size()] : allowed[rng() % allowed.size()];
    walk.tokens.push_back(token);
    EXPECT_TRUE(matcher.accept(token)) << label << " step " << step;
    if (vocab.is_eos(token)) break;
    EXPECT_TRUE(reference.accept(vocab.bytes(token)));
  }
  return walk;
}

// Replays a walk on a fresh matcher and checks each step's mask against the recorded reference.
void replay(const CompiledGrammar& compiled, const Walk& walk, const std::string& label) {
  GrammarMatcher matcher(compiled);
  std::vector<uint32_t> mask(compiled.vocab().mask_words());
  for (size_t step = 0; step < walk.masks.size(); ++step) {
    matcher.fill_mask(mask);
    ASSERT_EQ(mask_diff(mask, walk.masks[step], compiled.vocab()), "") << label << " step " << step;
    if (step < walk.tokens.size()) {
      ASSERT_TRUE(matcher.accept(walk.tokens[step])) << label << " step " << step;
    }
  }
}

std::shared_ptr<const Grammar> schema_grammar(const std::string& name) {
  std::ifstream in(kData + "/json_schemas/" + name);
  if (!in) throw std::runtime_error("missing test schema " + name);
  std::stringstream text;
  text << in.rdbuf();
  return json_schema_grammar(SchemaJson::parse(text.str()));
}

TEST(GrammarCachedMask, states_that_differ_only_below_the_top_keep_their_own_masks) {
  // "development" is the whole schema again ($ref "#"): one rule under different parents, so the
  // same tops with a different rest of the stack (after the closing quote: '}' and the end, or "}}").
  const auto vocab = qwen3_vocab();
  const CompiledGrammar compiled(schema_grammar("JsonSchemaStore--component.json"), vocab);
  const std::string prefixes[] = {
      R"({"name": "a)",
      R"({"development": {"name": "a)",
      R"({"development": {"development": {"name": "a)",
      R"({"keywords": ["a)",
      R"({"development": {"keywords": ["a)",
      R"({"name": "a", "development": {"private": true, "development": {"repo": "x)",
  };
  std::vector<uint32_t> mask(vocab->mask_words());
  for (int pass = 0; pass < 2; ++pass)
    for (const std::string& prefix : prefixes) {
      ScalarReference reference(compiled.grammar());
      GrammarMatcher matcher(compiled);
      ASSERT_TRUE(reference.accept(prefix)) << prefix;
      ASSERT_TRUE(matcher.accept_bytes(prefix)) << prefix;
      matcher.fill_mask(mask);
      ASSERT_EQ(mask_diff(mask, reference.mask(*vocab), *vocab), "") << "pass " << pass << ": " << prefix;
    }
  EXPECT_GE(compiled.stats().state_hits, std::size(prefixes));
}

TEST(GrammarCachedMask, the_same_stacks_with_and_without_a_completed_grammar_keep_their_own_masks) {
  // After "a" or "x" the only stack is the one at "b"; only "a" may also end here.
  const auto vocab = qwen3_vocab();
  const auto grammar = parse_grammar_text(R"(root ::= [ax] "b" | "a")");
  for (const auto& order : {std::vector<std::string>{"a", "x"}, std::vector<std::string>{"x", "a"}}) {
    const CompiledGrammar compiled(grammar, vocab);
    std::vector<uint32_t> mask(vocab->mask_words());
    for (const std::string& text : order) {
      ScalarReference reference(*grammar);
      GrammarMatcher matcher(compiled);
      ASSERT_TRUE(reference.accept(text));
      ASSERT_TRUE(matcher.accept_bytes(text));
      EXPECT_EQ(matcher.can_end(), text == "a");
      matcher.fill_mask(mask);
      EXPECT_EQ(mask_diff(mask, reference.mask(*vocab), *vocab), "") << "after " << text;
    }
  }
}

TEST(GrammarCachedMask, every_step_equals_a_scalar_walk_over_the_vocabulary_on_real_schemas) {
  const auto vocab = qwen3_vocab();
  for (const char* name : kSchemas) {
    const auto grammar = schema_grammar(name);
    const CompiledGrammar compiled(grammar, vocab);
    const Walk first = checked_walk(compiled, 1, name);
    const Walk second = checked_walk(compiled, 2, name);
    ASSERT_FALSE(HasFailure());
    // A fresh matcher over a seen path: every state comes from the state cache.
    const size_t hits_before = compiled.stats().state_hits;
    replay(compiled, first, std::string(name) + " replay");
    EXPECT_EQ(compiled.stats().state_hits - hits_before, first.masks.size()) << name;
    // A budget that holds a few states: entries are evicted and recomputed, never mixed up.
    const CompiledGrammar tight(grammar, vocab, MaskBudget{.state_bytes = size_t{64} << 10});
    for (int pass = 0; pass < 2; ++pass) {
      replay(tight, first, std::string(name) + " tight budget");
      replay(tight, second, std::string(name) + " tight budget");
    }
    EXPECT_LE(tight.stats().state_mask_bytes, size_t{64} << 10) << name;
    EXPECT_GT(tight.stats().state_hits, 0u) << name;
  }
}

}  // namespace
}  // namespace sanctum::grammar

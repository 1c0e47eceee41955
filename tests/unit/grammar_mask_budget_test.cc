// Masks under a byte budget small enough to evict at every step are the masks of an unbounded
// grammar, step for step: for random schemas of tests/data/json_schemas and for a schema of bounded
// strings (whose repeat profiles are evicted and built again), with several matchers of one grammar
// walking at once and a mask held across the evictions. The compiled-grammar cache keeps its bytes
// under its bound while many schemas are used in turn, and a grammar it evicted compiles again to
// the same masks.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar_reference.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::grammar {
namespace {

const std::string kData = SANCTUM_TEST_DATA_DIR;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The schemas of tests/data/json_schemas that compile, by name.
const std::vector<std::pair<std::string, std::shared_ptr<const Grammar>>>& compiling_schemas() {
  static const auto schemas = [] {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(kData + "/json_schemas"))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::vector<std::pair<std::string, std::shared_ptr<const Grammar>>> out;
    for (const auto& f : files) try {
        out.push_back({f.filename().string(), json_schema_grammar(SchemaJson::parse(read_file(f)))});
      } catch (const GrammarError&) {
      }
    return out;
  }();
  return schemas;
}

// Bounded strings and arrays (bench/grammar/profile_schema): each string's first step builds profiles.
constexpr const char* kBoundedSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 40}, "age": {"type": "integer", "minimum": 0, "maximum": 130},
  "address": {"type": "object", "properties": {"street": {"type": "string", "maxLength": 60},
    "city": {"type": "string", "maxLength": 40}}, "required": ["street", "city"]},
  "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 30}, "minItems": 3, "maxItems": 8},
  "bio": {"type": "string", "maxLength": 600}}, "required": ["name", "age", "address", "hobbies", "bio"]})";

// Mostly tokens without JSON punctuation, so that walks run deep into strings and their counts.
int32_t pick(const std::vector<uint32_t>& mask, const Vocabulary& vocab, std::mt19937& rng) {
  std::vector<int32_t> allowed, plain;
  for (int32_t id = 0; static_cast<size_t>(id) < vocab.size(); ++id) {
    if (!(mask[static_cast<size_t>(id) / 32] >> (id % 32) & 1)) continue;
    allowed.push_back(id);
    if (vocab.bytes(id).find_first_of("\",:{}[]") == std::string::npos) plain.push_back(id);
  }
  if (allowed.empty()) return -1;
  return !plain.empty() && rng() % 4 ? plain[rng() % plain.size()] : allowed[rng() % allowed.size()];
}

void expect_same(const PositionMask& a, const PositionMask& b, const std::string& label) {
  EXPECT_EQ(a.form, b.form) << label;
  EXPECT_EQ(a.ids, b.ids) << label;
  EXPECT_EQ(a.bits, b.bits) << label;
  EXPECT_EQ(a.uncertain, b.uncertain) << label;
  EXPECT_EQ(a.accepted_count, b.accepted_count) << label;
}

// `matchers` seeded walks of `steps` tokens, each a matcher of a grammar under `budget` stepped
// together with one of the same grammar unbounded; the walks take turns, so each one's masks are
// evicted by the others' between its steps.
void walk_in_lockstep(const std::shared_ptr<const Grammar>& grammar, MaskBudget budget, size_t matchers, size_t steps,
                      const std::string& label) {
  const auto vocab = qwen3_vocab();
  const CompiledGrammar loose(grammar, vocab);
  const CompiledGrammar tight(grammar, vocab, budget);
  // The k = 0 mask of the first terminal, taken before the walks and held through them.
  uint32_t first = 0;
  while (grammar->element(first).kind != ElementKind::bytes) ++first;
  const uint32_t context[2] = {first, kContextOpen};
  const std::shared_ptr<const PositionMask> held = tight.mask_for(context, nullptr);
  const PositionMask copy = *held;

  struct Walk {
    GrammarMatcher tight, loose;
    std::mt19937 rng;
    bool done = false;
  };
  std::vector<Walk> walks;
  walks.reserve(matchers);
  for (size_t i = 0; i < matchers; ++i)
    walks.push_back(Walk{GrammarMatcher(tight), GrammarMatcher(loose), std::mt19937(static_cast<uint32_t>(i + 1))});
  std::vector<uint32_t> got(vocab->mask_words()), want(vocab->mask_words());
  size_t filled = 0;
  for (size_t step = 0; step < steps; ++step)
    for (size_t i = 0; i < walks.size(); ++i) {
      Walk& w = walks[i];
      if (w.done) continue;
      w.tight.fill_mask(got);
      w.loose.fill_mask(want);
      ++filled;
      ASSERT_EQ(mask_diff(got, want, *vocab), "") << label << " walk " << i << " step " << step;
      const CompileStats s = tight.stats();
      ASSERT_LE(s.mask_bytes + s.repeat_profile_bytes + s.state_mask_bytes, budget.bytes) << label << " step " << step;
      const int32_t token = pick(want, *vocab, w.rng);
      if (token < 0 || vocab->is_eos(token)) {
        w.done = true;
        continue;
      }
      ASSERT_TRUE(w.tight.accept(token)) << label << " walk " << i << " step " << step;
      ASSERT_TRUE(w.loose.accept(token));
    }
  EXPECT_GT(filled, steps) << label;
  EXPECT_GT(tight.stats().evicted, 0u) << label;
  EXPECT_EQ(loose.stats().evicted, 0u) << label;
  expect_same(*held, copy, label + ": the held mask after the evictions");
  expect_same(*tight.mask_for(context, nullptr), copy, label + ": the same context computed again");
  expect_same(*loose.mask_for(context, nullptr), copy, label + ": the unbounded grammar's");
}

TEST(GrammarMaskBudget, evicting_at_every_step_gives_the_masks_of_an_unbounded_grammar) {
  // About six bitsets of the 152k vocabulary in context masks, two in whole-state masks.
  const MaskBudget tiny{.bytes = size_t{160} << 10, .state_bytes = size_t{40} << 10};
  const auto& schemas = compiling_schemas();
  ASSERT_GT(schemas.size(), 200u);
  std::mt19937 rng(48);
  for (int i = 0; i < 4; ++i) {
    const auto& [name, grammar] = schemas[rng() % schemas.size()];
    walk_in_lockstep(grammar, tiny, 3, 24, name);
  }
}

TEST(GrammarMaskBudget, evicted_repeat_profiles_are_built_again_to_the_same_masks) {
  // Room for the four profiles of the character rule (about 180 KB each) and some context masks.
  const MaskBudget small{.bytes = size_t{1536} << 10, .state_bytes = size_t{64} << 10};
  const auto grammar = json_schema_grammar(SchemaJson::parse(kBoundedSchema));
  walk_in_lockstep(grammar, small, 3, 48, "bounded strings");
}

// Walks `steps` seeded tokens on a fresh matcher of `g`, computing its masks.
void walk(const CompiledGrammar& g, size_t steps, uint32_t seed) {
  GrammarMatcher m(g);
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(g.vocab().mask_words());
  for (size_t i = 0; i < steps && !m.is_terminated(); ++i) {
    m.fill_mask(mask);
    const int32_t token = pick(mask, g.vocab(), rng);
    if (token < 0 || !m.accept(token)) break;
  }
}

TEST(GrammarMaskBudget, many_schemas_in_turn_stay_under_the_cache_bound) {
  const auto vocab = qwen3_vocab();
  constexpr size_t kBound = size_t{8} << 20;
  CompiledGrammarCache cache(kBound);
  const auto& schemas = compiling_schemas();
  size_t largest_after_walk = 0;
  for (size_t i = 0; i < schemas.size(); i += 4) {
    const auto& [name, grammar] = schemas[i];
    const CompiledGrammar g = cache.get(name, [&] { return CompiledGrammar(grammar, vocab); });
    ASSERT_LE(cache.stats().bytes, kBound) << "after looking up " << name;
    walk(g, 24, static_cast<uint32_t>(i));
    // Past the bound only by what the grammar in use computed since its lookup.
    const size_t held = cache.stats().bytes;
    ASSERT_LE(held, kBound + g.memory_bytes()) << "after walking " << name;
    largest_after_walk = std::max(largest_after_walk, held);
  }
  const auto s = cache.stats();
  EXPECT_GT(s.evicted, 0u);
  EXPECT_EQ(s.compiled, (schemas.size() + 3) / 4);
  EXPECT_GT(largest_after_walk, kBound / 2);  // the bound, not the count, is what held it
}

TEST(GrammarMaskBudget, the_cache_evicts_by_bytes_and_by_count_and_recompiles_to_the_same_masks) {
  const auto vocab = qwen3_vocab();
  const auto& schemas = compiling_schemas();
  const auto& a = schemas[10];
  const auto& b = schemas[20];
  const auto& c = schemas[30];
  auto compile = [&](const std::shared_ptr<const Grammar>& g) { return [&vocab, g] { return CompiledGrammar(g, vocab); }; };

  // By bytes: once A has computed masks past the bound, looking up B drops A (B, the newest, stays).
  CompiledGrammarCache by_bytes(size_t{64} << 10, 100);
  walk(by_bytes.get(a.first, compile(a.second)), 16, 1);
  ASSERT_GT(by_bytes.stats().bytes, size_t{64} << 10);
  by_bytes.get(b.first, compile(b.second));
  EXPECT_EQ(by_bytes.stats().grammars, 1u);
  EXPECT_EQ(by_bytes.stats().evicted, 1u);
  // A again: compiled anew, and its masks are those of a grammar that never left.
  const CompiledGrammar again = by_bytes.get(a.first, compile(a.second));
  EXPECT_EQ(by_bytes.stats().compiled, 3u);
  GrammarMatcher fresh(again), reference(CompiledGrammar(a.second, vocab));
  std::mt19937 rng(5);
  std::vector<uint32_t> got(vocab->mask_words()), want(vocab->mask_words());
  for (int step = 0; step < 24; ++step) {
    fresh.fill_mask(got);
    reference.fill_mask(want);
    ASSERT_EQ(mask_diff(got, want, *vocab), "") << "step " << step;
    const int32_t token = pick(want, *vocab, rng);
    if (token < 0 || vocab->is_eos(token)) break;
    ASSERT_TRUE(fresh.accept(token));
    ASSERT_TRUE(reference.accept(token));
  }

  // By count: the least recently used goes; a lookup makes a grammar the most recent.
  CompiledGrammarCache by_count(size_t{1} << 30, 2);
  by_count.get(a.first, compile(a.second));
  by_count.get(b.first, compile(b.second));
  by_count.get(a.first, compile(a.second));
  by_count.get(c.first, compile(c.second));  // B is the oldest now
  EXPECT_EQ(by_count.stats().compiled, 3u);
  by_count.get(a.first, compile(a.second));
  EXPECT_EQ(by_count.stats().compiled, 3u);
  by_count.get(b.first, compile(b.second));
  EXPECT_EQ(by_count.stats().compiled, 4u);
}

}  // namespace
}  // namespace sanctum::grammar

// Grammar matcher: the mask equals accepting each token one by one (the brute-force twin), for
// every step of seeded random walks; rollback restores the state; text-form errors name the problem.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_text.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"

namespace sanctum::grammar {
namespace {

// A small vocabulary whose tokens straddle rule boundaries: `":`, `},`, `"a`, multi-byte UTF-8.
std::shared_ptr<const Vocabulary> small_vocab() {
  std::vector<std::string> tokens = {"<eos>", "{",  "}",    "\"", "\":", "},", "\"a", "a",   "b",  "ab",   "abc",  ",",  ", ",
                                     " ",     "0",  "1",    "12", "-",   "[",  "]",   "[]",  "é",  "\xc3", "\xa9", "x",  "true",
                                     "tr",    "ue", "null", ".",  "e",   "\n", "\"}", "{\"", "1,", "a\"",  ":",    "\\", "\\\""};
  return std::make_shared<const Vocabulary>(tokens, std::vector<int32_t>{0});
}

std::vector<uint32_t> brute_force_mask(GrammarMatcher& m, const Vocabulary& vocab) {
  std::vector<uint32_t> mask(vocab.mask_words(), 0);
  for (int32_t id = 0; static_cast<size_t>(id) < vocab.size(); ++id) {
    if (!m.accept(id)) continue;
    mask[static_cast<size_t>(id) / 32] |= uint32_t{1} << (id % 32);
    m.rollback(1);
  }
  return mask;
}

std::vector<int32_t> allowed(const std::vector<uint32_t>& mask, size_t n) {
  std::vector<int32_t> out;
  for (size_t id = 0; id < n; ++id)
    if (mask[id / 32] >> (id % 32) & 1) out.push_back(static_cast<int32_t>(id));
  return out;
}

// Walks `walks` seeded random paths and checks fill_mask against the brute force at each step.
void expect_masks_match(const std::string& grammar_text, const std::shared_ptr<const Vocabulary>& vocab, int walks, int max_steps) {
  CompiledGrammar compiled(parse_grammar_text(grammar_text), vocab);
  for (int seed = 0; seed < walks; ++seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    GrammarMatcher m(compiled);
    std::vector<uint32_t> mask(vocab->mask_words());
    for (int step = 0; step < max_steps && !m.is_terminated(); ++step) {
      m.fill_mask(mask);
      const auto expected = brute_force_mask(m, *vocab);
      ASSERT_EQ(allowed(mask, vocab->size()), allowed(expected, vocab->size())) << "grammar:\n"
                                                                                << grammar_text << "\nseed " << seed << " step " << step;
      const auto ids = allowed(mask, vocab->size());
      if (ids.empty()) break;
      ASSERT_TRUE(m.accept(ids[rng() % ids.size()]));
    }
  }
}

TEST(GrammarMatcher, masks_equal_brute_force_on_a_json_like_grammar) {
  expect_masks_match(R"(
root ::= object
object ::= "{" ( pair ( "," " "? pair )* )? "}"
pair ::= string ":" value
value ::= string | number | object | array | "true" | "null"
array ::= "[" ( value ( "," value )* )? "]"
string ::= "\"" [^"\\]{0,4} "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
)",
                     small_vocab(), 40, 30);
}

TEST(GrammarMatcher, masks_equal_brute_force_with_nullable_and_nested_repeats) {
  expect_masks_match(R"(
root ::= a b? c
a ::= ("ab" | "a")*
b ::= "" | "x"{1,3}
c ::= [0-9]{2,} | "é"+ "\""
)",
                     small_vocab(), 40, 12);
}

TEST(GrammarMatcher, a_rule_after_a_skipped_nullable_rule_is_expanded) {
  // The return node of `a` and the expansion of `b` share (position, parent) in one step.
  auto vocab = small_vocab();
  CompiledGrammar compiled(parse_grammar_text("root ::= a b c\na ::= \"x\"?\nb ::= \"y\"?\nc ::= \"a\" | \"b\""), vocab);
  GrammarMatcher m(compiled);
  EXPECT_TRUE(m.accept_bytes("y"));
  EXPECT_TRUE(m.accept_bytes("a"));
  EXPECT_TRUE(m.can_end());
  expect_masks_match("root ::= a b c\na ::= \"x\"?\nb ::= \"\\\"\"?\nc ::= \"a\" | \"b\"", vocab, 10, 6);
}

TEST(GrammarMatcher, end_token_only_where_complete) {
  auto vocab = small_vocab();
  CompiledGrammar compiled(parse_grammar_text("root ::= \"ab\" \"c\"?"), vocab);
  GrammarMatcher m(compiled);
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept(0));
  EXPECT_TRUE(m.accept(9));  // "ab"
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.is_complete());  // "c" may still come
  EXPECT_FALSE(m.accept(10));     // "abc" is not allowed after "ab"
  EXPECT_TRUE(m.accept(0));
  EXPECT_TRUE(m.is_complete());
  EXPECT_TRUE(m.is_terminated());
}

TEST(GrammarMatcher, rollback_restores_the_mask) {
  auto vocab = small_vocab();
  CompiledGrammar compiled(parse_grammar_text("root ::= \"{\" [ab]* \"}\""), vocab);
  GrammarMatcher m(compiled);
  std::vector<uint32_t> before(vocab->mask_words()), after(vocab->mask_words());
  ASSERT_TRUE(m.accept(1));
  m.fill_mask(before);
  ASSERT_TRUE(m.accept(7));
  ASSERT_TRUE(m.accept(9));
  ASSERT_TRUE(m.accept(2));
  ASSERT_TRUE(m.accept(0));
  m.rollback(4);
  m.fill_mask(after);
  EXPECT_EQ(before, after);
  EXPECT_THROW(m.rollback(2), Error);
}

TEST(GrammarMatcher, a_multibyte_character_may_span_tokens) {
  auto vocab = small_vocab();
  CompiledGrammar compiled(parse_grammar_text("root ::= [é]"), vocab);
  GrammarMatcher m(compiled);
  EXPECT_TRUE(m.accept(22));  // first byte of é
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept(23));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarText, errors_name_line_and_problem) {
  auto message = [](const std::string& text) {
    try {
      parse_grammar_text(text);
    } catch (const GrammarError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("root ::= \"a\nb\"").find("line 1"), std::string::npos);
  EXPECT_NE(message("root ::= x").find("'x' is used but never defined"), std::string::npos);
  EXPECT_NE(message("a ::= \"x\"").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(message("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(message("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(message("root ::= [b-a]").find("reversed"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"{5,2}").find("empty"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"{99999}").find("limit"), std::string::npos);
}

TEST(GrammarText, rule_bodies_continue_across_lines) {
  auto g = parse_grammar_text("root ::= \"a\"\n  \"b\"\n  | \"c\"\nother ::= \"d\"");
  auto vocab = small_vocab();
  GrammarMatcher m(CompiledGrammar(g, vocab));
  EXPECT_TRUE(m.accept_bytes("ab"));
  EXPECT_TRUE(m.can_end());
  GrammarMatcher m2(CompiledGrammar(g, vocab));
  EXPECT_FALSE(m2.accept_bytes("ad"));
  EXPECT_TRUE(m2.accept_bytes("c"));
}

// A repetition of a repetition ("a"+++, a group around one) is folded into one repetition wherever
// the two accept the same strings, so that the matcher does not keep a stack per way of splitting the
// input among the levels (24 stacked + had run out of memory): each stacked form gives the masks of
// its plain form along random walks, and the unfoldable ones still equal the brute force.
TEST(GrammarText, stacked_repetitions_fold_into_one) {
  const auto vocab = small_vocab();
  const std::vector<std::pair<std::string, std::string>> same = {{"\"a\"++++++++++++++++++++++++", "\"a\"+"},
                                                                 {"((((\"ab\"+)+)+)+)+", "\"ab\"+"},
                                                                 {"(\"a\"?)+", "\"a\"*"},
                                                                 {"(\"a\"*){2,5}", "\"a\"*"},
                                                                 {"(\"a\"{2,})+", "\"a\"{2,}"},
                                                                 {"(\"a\"+){3,4}", "\"a\"{3,}"},
                                                                 {"(\"a\"?){2,3}", "\"a\"{0,3}"},
                                                                 {"(\"a\"{1,3})?", "\"a\"{0,3}"},
                                                                 {"((\"a\"{2,})?)+", "(\"a\"{2,})*"},
                                                                 {"(\"a\"?)?", "\"a\"?"}};
  for (const auto& [stacked, plain] : same) {
    const std::string a = "root ::= " + stacked + " \"b\"", b = "root ::= " + plain + " \"b\"";
    CompiledGrammar ca(parse_grammar_text(a), vocab), cb(parse_grammar_text(b), vocab);
    for (int seed = 0; seed < 8; ++seed) {
      std::mt19937 rng(static_cast<uint32_t>(seed));
      GrammarMatcher ma(ca), mb(cb);
      std::vector<uint32_t> mask_a(vocab->mask_words()), mask_b(vocab->mask_words());
      for (int step = 0; step < 12 && !ma.is_terminated(); ++step) {
        ma.fill_mask(mask_a);
        mb.fill_mask(mask_b);
        ASSERT_EQ(allowed(mask_a, vocab->size()), allowed(mask_b, vocab->size())) << a << " against " << b << ", seed " << seed;
        const auto ids = allowed(mask_a, vocab->size());
        if (ids.empty()) break;
        const int32_t pick = ids[rng() % ids.size()];
        ASSERT_TRUE(ma.accept(pick) && mb.accept(pick));
      }
    }
  }
  for (const char* unfolded : {"root ::= (\"a\"{3,3})+ \"b\"", "root ::= (\"a\"{2,3})? \"b\"", "root ::= ((\"a\"{2,})?){2,3} \"b\""})
    expect_masks_match(unfolded, vocab, 6, 12);
  // Bounds a repetition refuses are refused stacked as well; a fold past the count limit (15,000)
  // is not made, so the grammar stays as accepted as it was.
  EXPECT_THROW(parse_grammar_text("root ::= (\"a\"?){5,2}"), GrammarError);
  EXPECT_NO_THROW(parse_grammar_text("root ::= (\"a\"{5000,}){3}"));
}

// Nested repetitions that cannot fold (each level adds an optional item) still double the ways to
// read an "a" with each level: the matcher refuses such a grammar with a GrammarError once a byte
// takes more than its bound of expansions, rather than hanging the engine.
TEST(GrammarMatcher, a_grammar_too_ambiguous_to_step_is_refused) {
  std::string body = "\"a\"+";
  for (char c = 'b'; c <= 'z'; ++c) body = "(" + body + " \"" + std::string(1, c) + "\"?)+";
  const auto vocab = small_vocab();
  CompiledGrammar compiled(parse_grammar_text("root ::= " + body), vocab);
  GrammarMatcher m(compiled);
  const int32_t a = 7;  // "a"
  try {
    for (int i = 0; i < 64; ++i) ASSERT_TRUE(m.accept(a));
    FAIL() << "64 a's were read without reaching the bound";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.feature(), "ambiguity");
    EXPECT_NE(std::string(e.what()).find("ambiguous"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sanctum::grammar

// JSON Schema compiler: lowered forms accept exactly what they should (integer ranges against every
// integer in a window, formats and patterns against examples), properties come in declaration order,
// and every feature we cannot enforce is refused by name.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "grammar/compile.h"
#include "grammar/matcher.h"

namespace sanctum::grammar {
namespace {

std::shared_ptr<const Vocabulary> bytes_vocab() {
  std::vector<std::string> tokens = {"<eos>"};
  for (int b = 1; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  return std::make_shared<const Vocabulary>(tokens, std::vector<int32_t>{0});
}

bool accepts(const CompiledGrammar& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

CompiledGrammar compile(const std::string& schema, int max_whitespace = 0) {
  JsonGrammarOptions options;
  options.max_whitespace = max_whitespace;
  return compile_json_schema(SchemaJson::parse(schema), bytes_vocab(), options);
}

TEST(GrammarJsonSchema, integer_bounds_accept_exactly_the_range) {
  const std::pair<const char*, std::pair<int, int>> cases[] = {
      {R"({"type":"integer","minimum":-37,"maximum":205})", {-37, 205}},
      {R"({"type":"integer","minimum":7})", {7, 100000}},
      {R"({"type":"integer","maximum":-3})", {-100000, -3}},
      {R"({"type":"integer","exclusiveMinimum":9,"exclusiveMaximum":100})", {10, 99}},
      {R"({"type":"integer","minimum":0,"maximum":0})", {0, 0}},
  };
  for (const auto& [schema, range] : cases) {
    const auto g = compile(schema);
    for (int v = -1200; v <= 1200; ++v)
      EXPECT_EQ(accepts(g, std::to_string(v)), v >= range.first && v <= range.second) << schema << " " << v;
    EXPECT_FALSE(accepts(g, "007"));
    EXPECT_FALSE(accepts(g, "-0"));
  }
}

TEST(GrammarJsonSchema, bounded_numbers_stay_in_range) {
  const auto g = compile(R"({"type":"number","minimum":0,"maximum":1})");
  EXPECT_TRUE(accepts(g, "0"));
  EXPECT_TRUE(accepts(g, "1"));
  EXPECT_TRUE(accepts(g, "0.25"));
  EXPECT_FALSE(accepts(g, "1.5"));
  EXPECT_FALSE(accepts(g, "-0.1"));
  EXPECT_FALSE(accepts(g, "2"));
}

TEST(GrammarJsonSchema, properties_follow_declaration_order_and_required) {
  const auto g = compile(R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"boolean"}},
                           "required":["alpha"],"additionalProperties":false})");
  EXPECT_TRUE(accepts(g, R"({"zeta":1,"alpha":true})"));
  EXPECT_TRUE(accepts(g, R"({"alpha":false})"));
  EXPECT_FALSE(accepts(g, R"({"alpha":true,"zeta":1})"));
  EXPECT_FALSE(accepts(g, R"({"zeta":1})"));
  EXPECT_FALSE(accepts(g, R"({})"));
}

TEST(GrammarJsonSchema, whitespace_is_bounded) {
  const auto g = compile(R"({"type":"array","items":{"type":"integer"}})", 2);
  EXPECT_TRUE(accepts(g, "[ 1,  2 ]"));
  EXPECT_FALSE(accepts(g, "[   1]"));
}

TEST(GrammarJsonSchema, formats_and_patterns_match_examples) {
  EXPECT_TRUE(accepts(compile(R"({"type":"string","format":"date"})"), "\"2024-02-28\""));
  EXPECT_FALSE(accepts(compile(R"({"type":"string","format":"date"})"), "\"2024-13-01\""));
  EXPECT_TRUE(accepts(compile(R"({"type":"string","format":"uuid"})"), "\"123e4567-e89b-12d3-a456-426614174000\""));
  const auto p = compile(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"})");
  EXPECT_TRUE(accepts(p, "\"AB-123\""));
  EXPECT_FALSE(accepts(p, "\"AB-12\""));
  const auto unanchored = compile(R"({"type":"string","pattern":"x\"y"})");
  EXPECT_TRUE(accepts(unanchored, R"("ab x\"y cd")"));
}

TEST(GrammarJsonSchema, recursive_refs_and_enums) {
  const auto g = compile(R"({"$defs":{"n":{"type":"object","properties":{"v":{"enum":[1,"a",null]},
                           "next":{"$ref":"#/$defs/n"}},"additionalProperties":false}},"$ref":"#/$defs/n"})");
  EXPECT_TRUE(accepts(g, R"({"v":"a","next":{"v":null,"next":{}}})"));
  EXPECT_FALSE(accepts(g, R"({"v":2})"));
}

TEST(GrammarJsonSchema, escaped_only_characters_appear_in_strings_only_as_escapes) {
  JsonGrammarOptions options;
  options.max_whitespace = 0;
  options.escaped_only = "<";
  struct Case {
    const char *schema, *raw, *escaped;
  };
  const Case cases[] = {
      {R"({"type":"string"})", R"("a<b")", R"("a\u003cb")"},
      {R"({"type":"string","maxLength":9})", R"("a<b")", R"("a\u003cb")"},
      {R"({"type":"string","pattern":"^a.*"})", R"("a<b")", R"("a\u003cb")"},
      {R"({"enum":["a<b"]})", R"("a<b")", R"("a\u003cb")"},
      {R"({"type":"object","properties":{"k<":{"type":"integer"}},"required":["k<"]})", R"({"k<":1})", R"({"k\u003c":1})"},
  };
  for (const Case& c : cases) {
    const auto g = compile_json_schema(SchemaJson::parse(c.schema), bytes_vocab(), options);
    EXPECT_FALSE(accepts(g, c.raw)) << c.schema;
    EXPECT_TRUE(accepts(g, c.escaped)) << c.schema;
  }
}

TEST(GrammarJsonSchema, unsupported_features_are_refused_by_name) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"not":{"type":"string"}})", "not"},
      {R"({"type":"array","uniqueItems":true})", "uniqueItems"},
      {R"({"type":"object","patternProperties":{"^x":{}}})", "patternProperties"},
      {R"({"type":"string","format":"ipv6-zone"})", "format"},
      {R"({"type":"string","pattern":"(a)\\1"})", "pattern"},
      {R"({"oneOf":[{"type":"number"},{"type":"integer"}]})", "oneOf"},
      {R"({"type":"integer","multipleOf":3})", "multipleOf"},
      {R"({"$ref":"https://example.com/s.json"})", "$ref"},
      {R"({"type":"array","maxItems":100000})", "maxItems"},
  };
  for (const auto& [schema, feature] : cases) {
    try {
      compile(schema);
      ADD_FAILURE() << "compiled: " << schema;
    } catch (const GrammarError& e) {
      EXPECT_EQ(e.feature(), feature) << schema << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace sanctum::grammar

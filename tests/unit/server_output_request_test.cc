// The request fields that constrain output: response_format, grammar and json_schema (completions),
// logit_bias; bad shapes are 400s naming the field, schemas keep the client's key order; and the
// per-model grammar cache compiles a resent schema once, evicting the least recently used.
#include <gtest/gtest.h>

#include "grammar/compile.h"
#include "server/api_error.h"
#include "server/grammar_cache.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::server {
namespace {

std::string chat(const std::string& extra) { return R"({"messages":[{"role":"user","content":"hi"}],)" + extra + "}"; }
std::string completion(const std::string& extra) { return R"({"prompt":"hi",)" + extra + "}"; }

OpenAiRequest parse(const std::string& body, bool is_chat = true) {
  const RequestJson j = parse_body(body);
  return is_chat ? parse_chat_request(j) : parse_completion_request(j);
}

// The parameter a refused body names, "<ok>" when it is accepted.
std::string refused(const std::string& body, bool is_chat = true) {
  try {
    parse(body, is_chat);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body;
    return e.param();
  }
  return "<ok>";
}

TEST(ServerOutputRequest, response_format_kinds_parse_and_schemas_keep_their_key_order) {
  EXPECT_EQ(parse(chat(R"("response_format":{"type":"text"})")).format.kind, OutputFormat::Kind::text);
  EXPECT_EQ(parse(chat(R"("response_format":{"type":"json_object"})")).format.kind, OutputFormat::Kind::json_object);
  const OpenAiRequest r = parse(chat(
      R"("response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}}}}})"));
  EXPECT_EQ(r.format.kind, OutputFormat::Kind::json_schema);
  EXPECT_EQ(r.format.param, "response_format");
  EXPECT_EQ(r.format.schema["properties"].dump(), R"({"zeta":{"type":"integer"},"alpha":{"type":"string"}})");
  // The same on /v1/completions.
  EXPECT_EQ(parse(completion(R"("response_format":{"type":"json_object"})"), false).format.kind, OutputFormat::Kind::json_object);
}

TEST(ServerOutputRequest, malformed_response_formats_name_their_path) {
  EXPECT_EQ(refused(chat(R"("response_format":"json")")), "response_format");
  EXPECT_EQ(refused(chat(R"("response_format":{"type":"yaml"})")), "response_format.type");
  EXPECT_EQ(refused(chat(R"("response_format":{"type":"json_schema"})")), "response_format.json_schema");
  EXPECT_EQ(refused(chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"x"}})")), "response_format.json_schema.schema");
  EXPECT_EQ(refused(chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":[]}})")),
            "response_format.json_schema.schema");
  // A misspelt key must not pass as "no schema".
  EXPECT_EQ(refused(chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","shcema":{}}})")),
            "response_format.json_schema.shcema");
  EXPECT_EQ(refused(chat(R"("response_format":{"type":"json_schema","json_schema":{"schema":{},"strict":"yes"}})")),
            "response_format.json_schema.strict");
  EXPECT_EQ(refused(chat(R"("response_format":{"type":"json_object","schema":{}})")), "response_format.schema");
}

TEST(ServerOutputRequest, completions_take_a_grammar_or_a_json_schema_but_only_one_constraint) {
  const OpenAiRequest g = parse(completion(R"("grammar":"root ::= \"yes\" | \"no\"")"), false);
  EXPECT_EQ(g.format.kind, OutputFormat::Kind::grammar);
  EXPECT_EQ(g.format.grammar, R"(root ::= "yes" | "no")");
  EXPECT_EQ(g.format.param, "grammar");
  const OpenAiRequest s = parse(completion(R"("json_schema":{"type":"integer"})"), false);
  EXPECT_EQ(s.format.kind, OutputFormat::Kind::json_schema);
  EXPECT_EQ(s.format.param, "json_schema");
  EXPECT_EQ(refused(completion(R"("grammar":"")"), false), "grammar");
  EXPECT_EQ(refused(completion(R"("grammar":"root ::= \"a\"","json_schema":{})"), false), "json_schema");
  EXPECT_EQ(refused(completion(R"("response_format":{"type":"json_object"},"grammar":"root ::= \"a\"")"), false), "grammar");
  EXPECT_EQ(refused(chat(R"("grammar":"root ::= \"a\"")")), "grammar");  // chat has response_format only
}

TEST(ServerOutputRequest, logit_bias_takes_token_ids_and_biases_from_minus_to_plus_100) {
  const OpenAiRequest r = parse(chat(R"("logit_bias":{"42":5,"7":-100,"0":100})"));
  ASSERT_EQ(r.logit_bias.size(), 3u);
  EXPECT_EQ(r.logit_bias[0], (std::pair<int32_t, float>{42, 5.0f}));
  EXPECT_EQ(r.logit_bias[1], (std::pair<int32_t, float>{7, -100.0f}));
  EXPECT_TRUE(parse(chat(R"("logit_bias":{})")).logit_bias.empty());
  EXPECT_EQ(parse(completion(R"("logit_bias":{"3":1.5})"), false).logit_bias.size(), 1u);
  for (const char* bad :
       {R"({"abc":1})", R"({"-1":1})", R"({"1.5":1})", R"({"1":101})", R"({"1":-100.5})", R"({"1":"x"})", R"({"99999999999":1})", R"([1])"})
    EXPECT_EQ(refused(chat(std::string(R"("logit_bias":)") + bad)), "logit_bias") << bad;
  try {
    parse(chat(R"("logit_bias":{"abc":1})"));
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("'abc'"), std::string::npos);  // the message names the key
  }
}

// Each grammar's masks stay within the cache's bound: MaskBudget's default under the default bound,
// the whole bound (an eighth of it for whole-state masks) under a smaller one.
TEST(GrammarCache, a_smaller_bound_caps_each_grammars_mask_budget) {
  const Tokenizer tok = Tokenizer::load(std::string(SANCTUM_TEST_DATA_DIR) + "/tokenizers/qwen3");
  const grammar::MaskBudget fallback;
  EXPECT_EQ(GrammarCache(tok, 151936, {}).mask_budget().bytes, fallback.bytes);
  EXPECT_EQ(GrammarCache(tok, 151936, {}).mask_budget().state_bytes, fallback.state_bytes);
  const GrammarCache small(tok, 151936, {}, size_t{1} << 20);
  EXPECT_EQ(small.mask_budget().bytes, size_t{1} << 20);
  EXPECT_EQ(small.mask_budget().state_bytes, size_t{1} << 17);
  EXPECT_EQ(GrammarCache(tok, 151936, {}, 0).mask_budget().bytes, 0u);
}

TEST(GrammarCache, a_resent_grammar_is_compiled_once_and_the_least_recent_is_evicted) {
  const Tokenizer tok = Tokenizer::load(std::string(SANCTUM_TEST_DATA_DIR) + "/tokenizers/qwen3");
  GrammarCache cache(tok, 151936, {}, grammar::CompiledGrammarCache::kDefaultBytes, 2);
  auto vocab = cache.vocabulary();
  EXPECT_EQ(vocab->size(), 151936u);  // the model's padded width
  EXPECT_EQ(cache.vocabulary().get(), vocab.get());
  auto compile = [&](const std::string& schema) {
    return cache.get(schema, [&] { return grammar::compile_json_schema(grammar::SchemaJson::parse(schema), vocab); });
  };
  compile(R"({"type":"integer"})");
  compile(R"({"type":"string"})");
  compile(R"({"type":"integer"})");
  EXPECT_EQ(cache.compiled(), 2u);
  compile(R"({"type":"boolean"})");  // evicts the string schema, the least recently used
  compile(R"({"type":"integer"})");
  EXPECT_EQ(cache.compiled(), 3u);
  compile(R"({"type":"string"})");
  EXPECT_EQ(cache.compiled(), 4u);
  EXPECT_EQ(cache.size(), 2u);
}

}  // namespace
}  // namespace sanctum::server

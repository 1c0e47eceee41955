// Request parsing: every bad input is a 400 that names its parameter; good input maps to the engine.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace sanctum::server {
namespace {

using nlohmann::json;

std::string param_of(const std::string& body, bool chat = true) {
  try {
    json j = parse_body(body);
    if (chat) parse_chat_request(j);
    else parse_completion_request(j);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param().empty() ? "<none>" : e.param();
  }
  return "<ok>";
}

TEST(ServerRequest, parses_a_full_chat_request) {
  json j = parse_body(R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":7,"temperature":0.5,
    "top_p":0.9,"top_k":40,"min_p":0.1,"repetition_penalty":1.2,"presence_penalty":0.5,"frequency_penalty":-0.5,
    "seed":3,"stop":["a","b"],"n":2,"stream":true,"stream_options":{"include_usage":true},"logprobs":true,
    "top_logprobs":3,"chat_template_kwargs":{"enable_thinking":false},"user":"u-1"})");
  OpenAiRequest r = parse_chat_request(j);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(*r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.seed, 3u);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.stream && r.include_usage && r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_FALSE(r.chat_template_kwargs["enable_thinking"].get<bool>());
}

TEST(ServerRequest, content_parts_join_with_newlines) {
  OpenAiRequest r =
      parse_chat_request(parse_body(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})"));
  EXPECT_EQ(r.messages[0]["content"], "a\nb");
}

TEST(ServerRequest, bad_fields_name_their_param) {
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(param_of("{" + m + R"(,"temperature":"hot"})"), "temperature");
  EXPECT_EQ(param_of("{" + m + R"(,"temperature":2.5})"), "temperature");
  EXPECT_EQ(param_of("{" + m + R"(,"max_tokens":1.5})"), "max_tokens");
  EXPECT_EQ(param_of("{" + m + R"(,"max_tokens":-1})"), "max_tokens");
  EXPECT_EQ(param_of("{" + m + R"(,"max_completion_tokens":0})"), "max_completion_tokens");
  EXPECT_EQ(param_of("{" + m + R"(,"n":100})"), "n");
  EXPECT_EQ(param_of("{" + m + R"(,"stop":[1]})"), "stop");
  EXPECT_EQ(param_of("{" + m + R"(,"stream":1})"), "stream");
  EXPECT_EQ(param_of("{" + m + R"(,"seed":18446744073709551615})"), "seed");
  EXPECT_EQ(param_of("{" + m + R"(,"top_logprobs":2})"), "top_logprobs");
  EXPECT_EQ(param_of(R"({"messages":[]})"), "messages");
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user"}]})"), "messages[0].content");
  EXPECT_EQ(param_of(R"({"messages":[{"content":"x"}]})"), "messages[0].role");
  EXPECT_EQ(param_of(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})"),
            "messages[0].content[0].image_url.url");
  EXPECT_EQ(param_of(R"({"prompt":[[1],[2]]})", false), "prompt");
  EXPECT_EQ(param_of(R"({"prompt":""})", false), "prompt");
  EXPECT_EQ(param_of(R"({"prompt":[1,-2]})", false), "prompt");
}

TEST(ServerRequest, null_means_not_given) {
  OpenAiRequest r =
      parse_chat_request(parse_body(R"({"messages":[{"role":"user","content":"x"}],"temperature":null,"max_tokens":null,"stop":null})"));
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.sampling.temperature, 0.0f);
}

TEST(ServerRequest, body_level_problems_are_400s) {
  EXPECT_EQ(param_of(""), "<none>");
  EXPECT_EQ(param_of("{"), "<none>");
  EXPECT_EQ(param_of("[]"), "<none>");
  EXPECT_EQ(param_of(std::string(100, '[') + std::string(100, ']')), "<none>");
  EXPECT_EQ(param_of("{\"messages\":\"\xff\"}"), "<none>");
}

TEST(ServerRequest, utf8_validation_is_strict) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("caf\xc3\xa9 \xf0\x9f\x98\x80"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("\xc0\xaf"), 0u);          // overlong
  EXPECT_EQ(find_invalid_utf8("ab\xed\xa0\x80"), 2u);    // surrogate
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(find_invalid_utf8("x\xe2\x82"), 1u);         // truncated
}

TEST(ServerRequest, completion_prompt_forms) {
  EXPECT_EQ(*parse_completion_request(parse_body(R"({"prompt":"hi"})")).prompt, "hi");
  EXPECT_EQ(*parse_completion_request(parse_body(R"({"prompt":["hi"]})")).prompt, "hi");
  EXPECT_EQ(parse_completion_request(parse_body(R"({"prompt":[1,2]})")).prompt_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(parse_completion_request(parse_body(R"({"prompt":[[3]]})")).prompt_ids, (std::vector<int32_t>{3}));
  OpenAiRequest r = parse_completion_request(parse_body(R"({"prompt":"x","logprobs":2})"));
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
}

TEST(ServerRequest, error_bodies_are_openai_objects) {
  std::string body = error_body(bad_request("nope", "temperature"));
  json j = json::parse(body);
  EXPECT_EQ(j["error"]["message"], "nope");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

}  // namespace
}  // namespace sanctum::server

// The tool-calling part of chat requests and the unsupported-field rule: bad input is a 400 naming
// its path, tool-call arguments reach the template as objects in the client's key order, and every
// top-level field is either implemented, harmless or refused by name.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/request_fields.h"

namespace sanctum::server {
namespace {

using nlohmann::json;

const char* kWeather =
    R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}})";

std::string chat_body(const std::string& extra, const std::string& messages = R"([{"role":"user","content":"hi"}])") {
  return R"({"messages":)" + messages + (extra.empty() ? "" : "," + extra) + "}";
}

// The parameter a refused body names, "<ok>" when it is accepted.
std::string refused_param(const std::string& body, bool chat = true) {
  try {
    const RequestJson j = parse_body(body);
    if (chat) parse_chat_request(j);
    else parse_completion_request(j);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body;
    return e.param();
  }
  return "<ok>";
}

std::string refusal_message(const std::string& body) {
  try {
    parse_chat_request(parse_body(body));
  } catch (const ApiError& e) {
    return e.what();
  }
  return "";
}

TEST(ServerToolRequest, tools_choice_and_parallel_calls_parse) {
  const OpenAiRequest r = parse_chat_request(
      parse_body(chat_body(std::string(R"("tools":[)") + kWeather + R"(],"tool_choice":"auto","parallel_tool_calls":false)")));
  ASSERT_TRUE(r.tools.tools.is_array());
  EXPECT_EQ(r.tools.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.tools.choice, ToolChoice::automatic);
  EXPECT_FALSE(r.tools.parallel);
  EXPECT_FALSE(r.tools.offered().is_null());
}

TEST(ServerToolRequest, tool_choice_none_offers_no_tools_to_the_template) {
  const OpenAiRequest r = parse_chat_request(parse_body(chat_body(std::string(R"("tools":[)") + kWeather + R"(],"tool_choice":"none")")));
  EXPECT_EQ(r.tools.choice, ToolChoice::none);
  EXPECT_TRUE(r.tools.offered().is_null());
}

TEST(ServerToolRequest, required_and_named_tool_choice_parse_and_name_their_function) {
  const std::string tools = std::string(R"("tools":[)") + kWeather + "]";
  const OpenAiRequest required = parse_chat_request(parse_body(chat_body(tools + R"(,"tool_choice":"required")")));
  EXPECT_EQ(required.tools.choice, ToolChoice::required);
  const OpenAiRequest named =
      parse_chat_request(parse_body(chat_body(tools + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})")));
  EXPECT_EQ(named.tools.choice, ToolChoice::named);
  EXPECT_EQ(named.tools.named, "get_weather");
  EXPECT_EQ(refused_param(chat_body(tools + R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})")),
            "tool_choice.function.name");
  EXPECT_EQ(refused_param(chat_body(R"("tool_choice":"required")")), "tool_choice");
  EXPECT_NE(refusal_message(chat_body(R"("tool_choice":"required")")).find("needs 'tools'"), std::string::npos);
  EXPECT_EQ(refused_param(chat_body(tools + R"(,"tool_choice":"sometimes")")), "tool_choice");
}

TEST(ServerToolRequest, strict_tools_are_recorded) {
  EXPECT_TRUE(
      parse_chat_request(parse_body(chat_body(R"("tools":[{"type":"function","function":{"name":"f","strict":true}}])"))).tools.strict);
  EXPECT_FALSE(
      parse_chat_request(parse_body(chat_body(R"("tools":[{"type":"function","function":{"name":"f","strict":false}}])"))).tools.strict);
}

TEST(ServerToolRequest, malformed_tools_name_their_path) {
  EXPECT_EQ(refused_param(chat_body(R"("tools":{})")), "tools");
  EXPECT_EQ(refused_param(chat_body(R"("tools":[{"type":"retrieval"}])")), "tools[0].type");
  EXPECT_EQ(refused_param(chat_body(R"("tools":[{"type":"function"}])")), "tools[0].function");
  EXPECT_EQ(refused_param(chat_body(R"("tools":[{"type":"function","function":{"name":"two words"}}])")), "tools[0].function.name");
  EXPECT_EQ(refused_param(chat_body(R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])")),
            "tools[0].function.parameters");
  EXPECT_EQ(refused_param(chat_body(R"("tools":[{"type":"function","function":{"name":"f","strict":"yes"}}])")),
            "tools[0].function.strict");
  EXPECT_EQ(refused_param(chat_body(R"("parallel_tool_calls":"yes")")), "parallel_tool_calls");
}

TEST(ServerToolRequest, assistant_tool_call_arguments_become_objects_in_the_clients_key_order) {
  const std::string messages = R"([{"role":"user","content":"hi"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
      "function":{"name":"get_weather","arguments":"{\"zeta\": 1, \"alpha\": {\"b\": 2, \"a\": 3}}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"sunny"}])";
  const OpenAiRequest r = parse_chat_request(parse_body(chat_body("", messages)));
  const RequestJson& args = r.messages[1]["tool_calls"][0]["function"]["arguments"];
  ASSERT_TRUE(args.is_object());
  EXPECT_EQ(args.dump(), R"({"zeta":1,"alpha":{"b":2,"a":3}})");
  EXPECT_EQ(r.messages[1]["content"], "");  // a turn of only calls renders empty content, as in vLLM
  EXPECT_EQ(r.messages[2]["tool_call_id"], "call_1");
}

TEST(ServerToolRequest, empty_arguments_are_an_empty_object_and_bad_ones_are_refused) {
  auto call = [](const std::string& args) {
    return R"([{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function",
      "function":{"name":"f","arguments":)" +
           args + "}}]}]";
  };
  const OpenAiRequest r = parse_chat_request(parse_body(chat_body("", call(R"("")"))));
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"], RequestJson::object());
  EXPECT_EQ(refused_param(chat_body("", call(R"("{not json")"))), "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(refused_param(chat_body("", call(R"("[1]")"))), "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(refused_param(chat_body("", R"([{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"type":"function"}]}])")),
            "messages[1].tool_calls[0].id");
  EXPECT_EQ(refused_param(chat_body("", R"([{"role":"tool","content":"x"}])")), "messages[0].tool_call_id");
}

TEST(ServerRequestFields, unknown_and_unsupported_fields_are_refused_by_name) {
  EXPECT_EQ(refused_param(chat_body(R"("some_future_field":1)")), "some_future_field");
  EXPECT_EQ(refused_param(chat_body(R"("response_format":{"type":"xml"})")), "response_format.type");
  EXPECT_EQ(refused_param(chat_body(R"("store":true)")), "store");
  EXPECT_EQ(refused_param(chat_body(R"("store":false,"metadata":{"k":"v"},"user":"u","service_tier":"auto")")), "<ok>");
  EXPECT_EQ(refused_param(chat_body(R"("modalities":["text","audio"])")), "modalities");
  EXPECT_EQ(refused_param(chat_body(R"("functions":[])")), "functions");
  EXPECT_EQ(refused_param(chat_body(R"("some_future_field":null)")), "<ok>");  // null means not given
  EXPECT_EQ(refused_param(R"({"prompt":"x","suffix":"y"})", false), "suffix");
  EXPECT_EQ(refused_param(R"({"prompt":"x","best_of":2})", false), "best_of");
  EXPECT_EQ(refused_param(R"({"prompt":"x","best_of":2,"n":2})", false), "<ok>");
  EXPECT_EQ(refused_param(R"({"prompt":"x","tools":[]})", false), "tools");
}

TEST(ServerRequestFields, every_rule_names_a_reason_unless_implemented) {
  for (bool chat : {true, false})
    for (const FieldRule& rule : request_field_rules(chat))
      EXPECT_EQ(rule.kind == FieldRule::Kind::implemented, rule.reason.empty()) << rule.name;
}

TEST(ServerToolRequest, reasoning_effort_reaches_the_template_variables) {
  const OpenAiRequest r = parse_chat_request(parse_body(chat_body(R"("reasoning_effort":"low")")));
  EXPECT_EQ(r.chat_template_kwargs["reasoning_effort"], "low");
}

}  // namespace
}  // namespace sanctum::server

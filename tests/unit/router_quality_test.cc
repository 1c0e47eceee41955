// Quality detectors (repetition loops, empty completions), the SSE event splitter that lets the
// router inspect each event before the client sees it, and what events and bodies say in each API
// dialect.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/utf8.h"
#include "router/answer_reader.h"
#include "router/api_dialect.h"
#include "router/quality.h"
#include "router/sse_reader.h"

namespace sanctum::router {
namespace {

std::string times(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(RouterQuality, the_classic_degenerate_loop_is_found_with_its_unit) {
  const std::string text = "Sure, here are the coordinates: " + times("190/ / ", 12);
  auto rep = trailing_repetition(text, {});
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->unit.size(), 7u);
  EXPECT_EQ(rep->repeats, 12);
}

TEST(RouterQuality, word_and_period_one_loops_are_found) {
  EXPECT_TRUE(trailing_repetition(times(" multiplier", 10), {}));
  EXPECT_TRUE(trailing_repetition(times("a", 80), {}));
  EXPECT_TRUE(trailing_repetition(times("重复", 30), {}));  // non-ASCII units count as content
}

TEST(RouterQuality, below_the_thresholds_is_not_a_loop) {
  EXPECT_FALSE(trailing_repetition(times("190/ / ", 9), {}));  // 9 < min_repeats
  EXPECT_FALSE(trailing_repetition(times("ab", 20), {}));      // 40 bytes < min_chars
  RepetitionParams off;
  off.enabled = false;
  EXPECT_FALSE(trailing_repetition(times("190/ / ", 50), off));
}

TEST(RouterQuality, formatting_runs_and_natural_text_are_not_loops) {
  EXPECT_FALSE(trailing_repetition(std::string(200, '-'), {}));  // a markdown rule
  EXPECT_FALSE(trailing_repetition(times("| --- ", 30), {}));    // a table border
  EXPECT_FALSE(trailing_repetition(times(" ", 100), {}));
  EXPECT_FALSE(
      trailing_repetition("The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times.", {}));
  // A loop that ended, followed by real text, is not degenerate now.
  EXPECT_FALSE(trailing_repetition(times("na ", 20) + "Batman! That was the song.", {}));
}

TEST(RouterQuality, custom_thresholds_apply) {
  RepetitionParams p;
  p.min_repeats = 3;
  p.min_chars = 6;
  p.max_period = 4;
  EXPECT_TRUE(trailing_repetition("xx abcabcabc", p));
  EXPECT_FALSE(trailing_repetition("xx abcdeabcdeabcde", p));  // period 5 > max_period
}

TEST(RouterQuality, invalid_utf8_is_caught_on_raw_bytes) {
  EXPECT_TRUE(utf8::is_valid("plain ascii and é"));
  EXPECT_FALSE(utf8::is_valid(std::string("fine \xff\xfe", 7)));
  EXPECT_FALSE(utf8::is_valid(std::string("\xc3(", 2)));
}

TEST(RouterSse, events_split_across_reads_come_out_whole) {
  SseSplitter s;
  std::vector<std::string> out;
  ASSERT_TRUE(s.feed("data: {\"a\":1}\n", out));
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(s.feed("\ndata: {\"b\"", out));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], "data: {\"a\":1}\n\n");
  ASSERT_TRUE(s.feed(":2}\r\n\r\ndata: [DONE]\n\n", out));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1], "data: {\"b\":2}\r\n\r\n");
  EXPECT_EQ(out[2], "data: [DONE]\n\n");
  EXPECT_EQ(s.pending(), 0u);
}

TEST(RouterSse, an_endless_event_is_refused) {
  SseSplitter s(64);
  std::vector<std::string> out;
  EXPECT_FALSE(s.feed(std::string(100, 'x'), out));
}

TEST(RouterSse, event_inspection_reads_text_usage_errors_and_done) {
  auto chat = inspect_sse_event("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n");
  EXPECT_EQ(chat.text, "Hel");
  EXPECT_FALSE(chat.done);
  auto legacy = inspect_sse_event("data: {\"choices\":[{\"index\":0,\"text\":\"lo\"}]}\n\n");
  EXPECT_EQ(legacy.text, "lo");
  auto other_choice = inspect_sse_event("data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"zz\"}}]}\n\n");
  EXPECT_EQ(other_choice.text, "");
  auto usage = inspect_sse_event("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n");
  EXPECT_EQ(usage.total_tokens.value_or(-1), 7);
  auto err = inspect_sse_event("data: {\"error\":{\"message\":\"boom\"}}\n\n");
  EXPECT_TRUE(err.error);
  EXPECT_EQ(err.error_message, "boom");
  EXPECT_TRUE(inspect_sse_event("data: [DONE]\n\n").done);
  EXPECT_TRUE(inspect_sse_event("data: not json\n\n").parse_failed);
  auto tool = inspect_sse_event("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\n");
  EXPECT_TRUE(tool.has_tool_call);
}

TEST(RouterSse, completion_bodies_report_emptiness_text_and_usage) {
  auto full = inspect_completion_body(R"({"choices":[{"message":{"content":"4"}}],"usage":{"total_tokens":12}})");
  EXPECT_TRUE(full.parsed);
  EXPECT_FALSE(full.empty);
  EXPECT_EQ(full.text, "4");
  EXPECT_EQ(full.total_tokens.value_or(-1), 12);
  EXPECT_TRUE(inspect_completion_body(R"({"choices":[{"message":{"content":""}}]})").empty);
  EXPECT_FALSE(inspect_completion_body(R"({"choices":[{"message":{"content":null,"tool_calls":[{"id":"x"}]}}]})").empty);
  EXPECT_FALSE(inspect_completion_body(R"({"choices":[{"text":"hi"}]})").empty);
  EXPECT_FALSE(inspect_completion_body("[1,2]").parsed);
}

// Event and body shapes as the Anthropic Messages and OpenAI Responses references document them.
TEST(RouterSse, messages_events_give_text_tool_use_usage_and_the_end) {
  const ApiDialect m = ApiDialect::messages;
  auto start = inspect_sse_event(
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","
      "\"content\":[],\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
      m);
  EXPECT_EQ(start.input_tokens.value_or(-1), 25);
  EXPECT_FALSE(start.done);
  auto text = inspect_sse_event(
      "event: content_block_delta\ndata: "
      "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
      m);
  EXPECT_EQ(text.text, "Hello");
  auto thinking = inspect_sse_event(
      "event: content_block_delta\ndata: "
      "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Hm\"}}\n\n",
      m);
  EXPECT_EQ(thinking.text, "Hm");
  auto tool = inspect_sse_event(
      "event: content_block_start\ndata: "
      "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\","
      "\"name\":\"get_weather\",\"input\":{}}}\n\n",
      m);
  EXPECT_TRUE(tool.has_tool_call);
  auto delta = inspect_sse_event(
      "event: message_delta\ndata: "
      "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n",
      m);
  EXPECT_EQ(delta.output_tokens.value_or(-1), 15);
  EXPECT_FALSE(delta.input_tokens.has_value());
  EXPECT_TRUE(inspect_sse_event("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", m).done);
  auto err =
      inspect_sse_event("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
                        m);
  EXPECT_TRUE(err.error);
  EXPECT_EQ(err.error_message, "Overloaded");
  // [DONE] means nothing in this dialect.
  EXPECT_FALSE(inspect_sse_event("data: [DONE]\n\n", m).done);
}

TEST(RouterSse, responses_events_give_text_calls_usage_and_the_end) {
  const ApiDialect r = ApiDialect::responses;
  auto text = inspect_sse_event(
      "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,"
      "\"content_index\":0,\"delta\":\"Hi\"}\n\n",
      r);
  EXPECT_EQ(text.text, "Hi");
  auto call = inspect_sse_event(
      "event: response.output_item.added\ndata: "
      "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\","
      "\"id\":\"fc_1\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"\"}}\n\n",
      r);
  EXPECT_TRUE(call.has_tool_call);
  auto done = inspect_sse_event(
      "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\","
      "\"usage\":{\"input_tokens\":9,\"output_tokens\":3,\"total_tokens\":12}}}\n\n",
      r);
  EXPECT_TRUE(done.done);
  EXPECT_FALSE(done.error);
  EXPECT_EQ(done.total_tokens.value_or(-1), 12);
  auto failed = inspect_sse_event(
      "event: response.failed\ndata: "
      "{\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\","
      "\"message\":\"boom\"}}}\n\n",
      r);
  EXPECT_TRUE(failed.done);
  EXPECT_TRUE(failed.error);
  EXPECT_EQ(failed.error_message, "boom");
  EXPECT_TRUE(inspect_sse_event("event: error\ndata: {\"type\":\"error\",\"code\":\"x\",\"message\":\"bad\"}\n\n", r).error);
}

TEST(RouterSse, agent_api_bodies_report_emptiness_text_and_usage) {
  auto msg = inspect_completion_body(
      R"({"type":"message","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"4"}],"usage":{"input_tokens":10,"output_tokens":2}})",
      ApiDialect::messages);
  EXPECT_FALSE(msg.empty);
  EXPECT_EQ(msg.text, "t4");
  EXPECT_EQ(msg.total_tokens.value_or(-1), 12);
  EXPECT_TRUE(inspect_completion_body(R"({"type":"message","content":[]})", ApiDialect::messages).empty);
  EXPECT_FALSE(inspect_completion_body(R"({"content":[{"type":"tool_use","id":"t","name":"f","input":{}}]})", ApiDialect::messages).empty);
  auto resp = inspect_completion_body(
      R"({"object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}],"usage":{"total_tokens":5}})",
      ApiDialect::responses);
  EXPECT_FALSE(resp.empty);
  EXPECT_EQ(resp.text, "Hi");
  EXPECT_EQ(resp.total_tokens.value_or(-1), 5);
  EXPECT_TRUE(inspect_completion_body(R"({"object":"response","output":[]})", ApiDialect::responses).empty);
  EXPECT_FALSE(
      inspect_completion_body(R"({"output":[{"type":"function_call","name":"f","arguments":"{}"}]})", ApiDialect::responses).empty);
  // Token lists are not answers to judge.
  EXPECT_FALSE(inspect_completion_body(R"({"tokens":[]})", ApiDialect::tokens).empty);
}

TEST(RouterDialect, errors_take_the_shape_of_the_path) {
  EXPECT_EQ(dialect_of_path("/v1/messages"), ApiDialect::messages);
  EXPECT_EQ(dialect_of_path("/v1/responses"), ApiDialect::responses);
  EXPECT_EQ(dialect_of_path("/tokenize"), ApiDialect::tokens);
  EXPECT_EQ(dialect_of_path("/v1/chat/completions"), ApiDialect::openai);
  const server::ApiError e(429, "rate_limit_exceeded", "slow down", "", "budget_exceeded");
  auto anthropic = nlohmann::json::parse(dialect_error_body(ApiDialect::messages, e));
  EXPECT_EQ(anthropic["type"], "error");
  EXPECT_EQ(anthropic["error"]["type"], "rate_limit_error");
  EXPECT_EQ(anthropic["error"]["message"], "slow down");
  auto openai = nlohmann::json::parse(dialect_error_body(ApiDialect::responses, e));
  EXPECT_EQ(openai["error"]["code"], "budget_exceeded");
  EXPECT_EQ(dialect_error_event(ApiDialect::messages, "cut", "c").rfind("event: error\ndata: ", 0), 0u);
  auto ev = inspect_sse_event(dialect_error_event(ApiDialect::messages, "cut", "c"), ApiDialect::messages);
  EXPECT_TRUE(ev.error);
  EXPECT_EQ(ev.error_message, "cut");
  EXPECT_TRUE(inspect_sse_event(dialect_error_event(ApiDialect::responses, "cut", "c"), ApiDialect::responses).error);
  EXPECT_TRUE(inspect_sse_event(dialect_error_event(ApiDialect::openai, "cut", "c")).error);
}

}  // namespace
}  // namespace sanctum::router

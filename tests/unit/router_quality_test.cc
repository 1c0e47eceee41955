// Quality detectors (repetition loops, empty completions) and the SSE event splitter that lets the
// router inspect each event before the client sees it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/utf8.h"
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

}  // namespace
}  // namespace sanctum::router

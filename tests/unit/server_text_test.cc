// Stop strings over streamed pieces: the result must not depend on how the text was cut into pieces
// (the <think> split is tested in chat_reasoning_test.cc).
#include <gtest/gtest.h>

#include "engine/stop_matcher.h"

namespace sanctum {
namespace {

// Feeds `text` in pieces of `step` bytes; returns the emitted text and whether it stopped.
std::pair<std::string, bool> run_stop(const std::vector<std::string>& stops, const std::string& text, size_t step) {
  StopMatcher m(stops);
  std::string out;
  for (size_t i = 0; i < text.size(); i += step) {
    auto r = m.push(text.substr(i, step));
    out += r.text;
    if (r.stopped) return {out, true};
  }
  return {out + m.flush(), false};
}

TEST(ServerText, stop_string_split_across_pieces_stops_and_is_never_emitted) {
  for (size_t step = 1; step <= 12; ++step) {
    auto [out, stopped] = run_stop({"STOP"}, "hello STOP world", step);
    EXPECT_TRUE(stopped) << step;
    EXPECT_EQ(out, "hello ") << step;
  }
}

TEST(ServerText, earliest_of_several_stop_strings_wins) {
  auto [out, stopped] = run_stop({"world", "lo w"}, "hello world", 3);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "hel");
}

TEST(ServerText, the_matched_stop_string_is_the_one_that_matched_earliest) {
  for (size_t step = 1; step <= 6; ++step) {
    StopMatcher m({"world", "lo w", "xyz"});
    const std::string text = "hello world";
    for (size_t i = 0; i < text.size() && !m.stopped(); i += step) m.push(text.substr(i, step));
    EXPECT_EQ(m.matched(), "lo w") << step;
  }
  StopMatcher tie({"ab", "a"});
  EXPECT_TRUE(tie.push("xab").stopped);
  EXPECT_EQ(tie.matched(), "ab");  // both match at 1: the first listed
  StopMatcher none({"q"});
  none.push("abc");
  EXPECT_EQ(none.matched(), "");
}

TEST(ServerText, partial_match_at_the_end_is_released_on_flush) {
  auto [out, stopped] = run_stop({"STOP"}, "ends with ST", 1);
  EXPECT_FALSE(stopped);
  EXPECT_EQ(out, "ends with ST");
}

TEST(ServerText, held_text_is_only_a_possible_stop_prefix) {
  StopMatcher m({"abc"});
  EXPECT_EQ(m.push("xxa").text, "xx");
  EXPECT_EQ(m.push("bd").text, "abd");
}

TEST(ServerText, no_stop_strings_pass_everything) {
  auto [out, stopped] = run_stop({}, "anything at all", 4);
  EXPECT_FALSE(stopped);
  EXPECT_EQ(out, "anything at all");
}

}  // namespace
}  // namespace sanctum

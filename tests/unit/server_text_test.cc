// Stop strings and the <think> split over streamed pieces: the result must not depend on how the
// text was cut into pieces.
#include <gtest/gtest.h>

#include "engine/stop_matcher.h"
#include "server/reasoning_splitter.h"

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

std::pair<std::string, std::string> run_split(bool start_inside, const std::string& text, size_t step) {
  server::ReasoningSplitter s(true, start_inside);
  std::string content, reasoning;
  for (size_t i = 0; i < text.size(); i += step) {
    auto o = s.push(text.substr(i, step));
    content += o.content;
    reasoning += o.reasoning;
  }
  auto o = s.flush();
  return {content + o.content, reasoning + o.reasoning};
}

TEST(ServerText, think_block_goes_to_reasoning_for_any_cut) {
  for (size_t step = 1; step <= 9; ++step) {
    auto [content, reasoning] = run_split(false, "<think>\nweigh it\n</think>\n\nThe answer.", step);
    EXPECT_EQ(reasoning, "\nweigh it\n") << step;
    EXPECT_EQ(content, "The answer.") << step;
  }
}

TEST(ServerText, prompt_opened_think_block) {
  auto [content, reasoning] = run_split(true, "pondering</think>done", 2);
  EXPECT_EQ(reasoning, "pondering");
  EXPECT_EQ(content, "done");
}

TEST(ServerText, think_tag_later_in_the_text_is_content) {
  auto [content, reasoning] = run_split(false, "say <think> literally", 3);
  EXPECT_EQ(reasoning, "");
  EXPECT_EQ(content, "say <think> literally");
}

TEST(ServerText, unterminated_reasoning_stays_reasoning) {
  auto [content, reasoning] = run_split(false, "<think>still going", 4);
  EXPECT_EQ(reasoning, "still going");
  EXPECT_EQ(content, "");
}

TEST(ServerText, disabled_splitter_passes_tags_through) {
  server::ReasoningSplitter s(false, false);
  EXPECT_EQ(s.push("<think>x</think>y").content, "<think>x</think>y");
}

}  // namespace
}  // namespace sanctum

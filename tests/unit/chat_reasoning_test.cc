// ReasoningSplitter: the <think> block goes to reasoning and the answer to content, the same however
// the generated text is cut into streamed pieces.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "chat/reasoning_splitter.h"

namespace sanctum {
namespace {

struct Split {
  std::string reasoning, content;
};

// Feeds `text` in pieces of `step` bytes, then flushes.
Split split_in_pieces(std::string_view text, size_t step, bool start_inside, bool enabled = true) {
  ReasoningSplitter s(enabled, start_inside);
  Split out;
  for (size_t i = 0; i < text.size(); i += step) {
    ReasoningSplitter::Out o = s.push(text.substr(i, step));
    out.reasoning += o.reasoning;
    out.content += o.content;
  }
  ReasoningSplitter::Out o = s.flush();
  out.reasoning += o.reasoning;
  out.content += o.content;
  return out;
}

// The split of `text` for every piece size from one byte to the whole text; all must agree.
Split split_any_cut(std::string_view text, bool start_inside = false, bool enabled = true) {
  const Split whole = split_in_pieces(text, text.size() + 1, start_inside, enabled);
  for (size_t step = 1; step <= text.size(); ++step) {
    const Split cut = split_in_pieces(text, step, start_inside, enabled);
    EXPECT_EQ(cut.reasoning, whole.reasoning) << "pieces of " << step << " bytes";
    EXPECT_EQ(cut.content, whole.content) << "pieces of " << step << " bytes";
  }
  return whole;
}

TEST(ReasoningSplitter, think_block_goes_to_reasoning_and_the_newlines_after_it_are_dropped) {
  const Split s = split_any_cut("<think>\nweigh it\n</think>\n\nThe answer.");
  EXPECT_EQ(s.reasoning, "\nweigh it\n");
  EXPECT_EQ(s.content, "The answer.");
}

TEST(ReasoningSplitter, whitespace_before_the_opening_tag_is_dropped) {
  const Split s = split_any_cut(" \n<think>a</think>b");
  EXPECT_EQ(s.reasoning, "a");
  EXPECT_EQ(s.content, "b");
}

TEST(ReasoningSplitter, prompt_opened_the_block_so_text_is_reasoning_until_the_close_tag) {
  const Split s = split_any_cut("pondering</think>answer <think>not reasoning</think>", true);
  EXPECT_EQ(s.reasoning, "pondering");
  EXPECT_EQ(s.content, "answer <think>not reasoning</think>");
}

TEST(ReasoningSplitter, opening_tag_after_other_text_is_content) {
  const Split later = split_any_cut("say <think> literally");
  EXPECT_EQ(later.reasoning, "");
  EXPECT_EQ(later.content, "say <think> literally");
  const Split glued = split_any_cut("pre<think>abc</think>post");
  EXPECT_EQ(glued.reasoning, "");
  EXPECT_EQ(glued.content, "pre<think>abc</think>post");
}

TEST(ReasoningSplitter, no_tags_is_all_content) {
  const Split s = split_any_cut("just an answer < think");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "just an answer < think");
}

TEST(ReasoningSplitter, partial_close_tag_inside_reasoning_stays_reasoning) {
  const Split s = split_any_cut("<think>abc</thi</think>post</think>");
  EXPECT_EQ(s.reasoning, "abc</thi");
  EXPECT_EQ(s.content, "post</think>");
}

TEST(ReasoningSplitter, unterminated_reasoning_stays_reasoning) {
  const Split s = split_any_cut("<think>still going </thi");
  EXPECT_EQ(s.reasoning, "still going </thi");
  EXPECT_EQ(s.content, "");
}

TEST(ReasoningSplitter, output_cut_inside_the_opening_tag_is_content) {
  const Split s = split_any_cut("  <thi");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "  <thi");
}

TEST(ReasoningSplitter, answer_of_only_newlines_after_the_block_is_empty) {
  const Split s = split_any_cut("<think>x</think>\r\n\n");
  EXPECT_EQ(s.reasoning, "x");
  EXPECT_EQ(s.content, "");
}

TEST(ReasoningSplitter, disabled_splitter_passes_tags_through) {
  const Split s = split_any_cut("<think>x</think>\ny", false, false);
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "<think>x</think>\ny");
  EXPECT_EQ(split_any_cut("x</think>y", true, false).content, "x</think>y");
}

}  // namespace
}  // namespace sanctum

// ReasoningSplitter: <think> blocks separated from the answer however the text is chunked.
#include <gtest/gtest.h>

#include <string>

#include "chat/reasoning.h"

namespace {

TEST(ReasoningSplitter, whole_text) {
  const auto d = sanctum::split_reasoning("<think>\nweigh options\n</think>\n\nThe answer.");
  EXPECT_EQ(d.reasoning, "\nweigh options\n");
  EXPECT_EQ(d.content, "\n\nThe answer.");
}

TEST(ReasoningSplitter, prompt_already_opened_the_block) {
  const auto d = sanctum::split_reasoning("thinking</think>answer <think>not reasoning</think>", true);
  EXPECT_EQ(d.reasoning, "thinking");
  EXPECT_EQ(d.content, "answer <think>not reasoning</think>");
}

TEST(ReasoningSplitter, no_tags_is_all_content) {
  const auto d = sanctum::split_reasoning("just an answer < think");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "just an answer < think");
}

TEST(ReasoningSplitter, every_chunking_gives_the_same_split) {
  const std::string text = "pre<think>abc</thi</think>post</think>";
  const auto whole = sanctum::split_reasoning(text);
  for (size_t chunk = 1; chunk <= text.size(); ++chunk) {
    sanctum::ReasoningSplitter s;
    std::string reasoning, content;
    for (size_t k = 0; k < text.size(); k += chunk) {
      const auto d = s.push(std::string_view(text).substr(k, chunk));
      reasoning += d.reasoning;
      content += d.content;
    }
    const auto d = s.flush();
    reasoning += d.reasoning;
    content += d.content;
    EXPECT_EQ(reasoning, whole.reasoning) << "chunk " << chunk;
    EXPECT_EQ(content, whole.content) << "chunk " << chunk;
  }
  EXPECT_EQ(whole.reasoning, "abc</thi");
  EXPECT_EQ(whole.content, "prepost</think>");
}

}  // namespace

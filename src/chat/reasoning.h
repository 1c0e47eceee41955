#pragma once
// Streaming split of generated text into reasoning (between <think> and </think>) and answer content,
// for the server's reasoning_content. Tags split across chunks are handled; only the first reasoning
// block counts (a later "<think>" is ordinary content).
#include <string>
#include <string_view>

namespace sanctum {

class ReasoningSplitter {
 public:
  struct Delta {
    std::string reasoning;
    std::string content;
  };

  // starts_in_reasoning: the prompt already opened the block (templates that end the generation prompt
  // with "<think>\n"), so text is reasoning until the close tag.
  explicit ReasoningSplitter(bool starts_in_reasoning = false, std::string open_tag = "<think>",
                             std::string close_tag = "</think>");

  Delta push(std::string_view text);
  Delta flush();  // releases any held partial tag as text of the current kind

  bool in_reasoning() const { return state_ == State::reasoning; }

 private:
  enum class State { before, reasoning, after };
  std::string open_, close_;
  State state_;
  std::string held_;  // a suffix that may be the start of a tag
};

// Splits a complete text in one go.
ReasoningSplitter::Delta split_reasoning(std::string_view text, bool starts_in_reasoning = false);

}  // namespace sanctum

#pragma once
// Splits streamed model output into reasoning (inside <think>...</think>) and content, for the
// server's reasoning_content. The opening tag counts only at the very start of the output (after
// whitespace), or is implied when the prompt already opened the block; a later "<think>" is content.
// Tags split across pieces are held back until whole, so the split never depends on the chunking.
#include <string>
#include <string_view>

namespace sanctum {

class ReasoningSplitter {
 public:
  // enabled=false passes everything through as content.
  ReasoningSplitter(bool enabled, bool start_in_reasoning);

  struct Out {
    std::string content, reasoning;
  };
  Out push(std::string_view text);
  Out flush();  // end of output: whatever is held goes where it belongs

 private:
  enum class Mode { before, reasoning, content };
  bool enabled_;
  Mode mode_;
  bool strip_newlines_ = false;  // just closed the block: drop the newlines the template puts after it
  std::string held_;
};

}  // namespace sanctum

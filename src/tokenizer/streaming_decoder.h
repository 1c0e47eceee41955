#pragma once
// Incremental detokenizer: fed one id at a time, returns only complete UTF-8 text, never a broken
// code point. For valid output the concatenation of push() results and flush() equals decode(all ids).
#include <cstdint>
#include <string>
#include <vector>

namespace sanctum {

class Tokenizer;

class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false)
      : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

  std::string push(int32_t id);
  // Emits whatever is still held (an incomplete sequence becomes U+FFFD) and resets.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  int32_t context_ = -1;          // last token already emitted: decoders see it so first-token rules stay right
  std::vector<int32_t> pending_;  // tokens whose text is not emitted yet
};

}  // namespace sanctum

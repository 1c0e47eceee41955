#pragma once
// Added tokens (special and not): found in the input before normalization and pre-tokenization,
// leftmost-longest, honouring lstrip / rstrip / single_word / normalized, as HF's AddedVocabulary.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sanctum {

class Normalizer;

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

struct Segment {
  int32_t id;  // added token id, or -1 for ordinary text
  size_t begin, end;
};

class AddedVocab {
 public:
  AddedVocab() = default;
  // `normalizer` (may be null) is applied to the content of tokens with normalized=true.
  AddedVocab(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // Splits text into added-token and ordinary segments. `normalized_pass` selects the tokens matched
  // after normalization (normalized=true) instead of those matched on raw input. With
  // parse_special=false, special tokens stay ordinary text (HF split_special_tokens).
  void split(std::string_view text, bool normalized_pass, bool parse_special, std::vector<Segment>& out) const;

  bool has_normalized_tokens() const { return !tries_[1].nodes.empty() && tries_[1].has_tokens; }
  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                 // index into tokens_
  };
  struct Trie {
    std::vector<Node> nodes;
    bool first_byte[256] = {};
    bool has_tokens = false;
    void insert(std::string_view key, int32_t token);
    // Longest token starting at text[pos]: returns its index and sets *end, or -1.
    int32_t longest(std::string_view text, size_t pos, size_t* end) const;
  };

  std::vector<AddedToken> tokens_;
  Trie tries_[2];               // [0]: matched on raw input, [1]: matched on normalized text
  std::vector<int32_t> by_id_;  // id -> index into tokens_, -1 when none
};

}  // namespace sanctum

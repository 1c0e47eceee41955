#pragma once
// The token vocabulary as the grammar sees it: each id's bytes (UTF-8 pieces after the byte-level
// decoder), the ids that end generation, and the ids sorted by their bytes so that tokens sharing a
// prefix are walked once (the sorted order is an implicit trie).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sanctum {
class Tokenizer;
}

namespace sanctum::grammar {

class Vocabulary {
 public:
  // token_bytes[id] is the id's text; an empty entry is never allowed by a grammar (special tokens,
  // unused padding ids). eos_ids are allowed only where the grammar is complete.
  Vocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> eos_ids);
  // Special tokens are excluded, except those in `special_as_text` (a tool-call format whose tags
  // are special tokens, like Mistral's [TOOL_CALLS]: the grammar writes them as their text);
  // `vocab_size` (the model's, often padded past the tokenizer's) sets the mask width, 0 for the
  // tokenizer's own size; `eos_ids` are the ids that end generation (empty: the tokenizer's).
  static std::shared_ptr<const Vocabulary> from_tokenizer(const Tokenizer& tokenizer, size_t vocab_size = 0,
                                                          std::vector<int32_t> eos_ids = {}, std::span<const int32_t> special_as_text = {});

  size_t size() const { return bytes_.size(); }
  size_t mask_words() const { return (bytes_.size() + 31) / 32; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  bool is_eos(int32_t id) const;
  // Ids with bytes, ascending by bytes; sorted_index(id) is the inverse (-1 for ids without bytes).
  const std::vector<int32_t>& sorted() const { return sorted_; }
  int32_t sorted_index(int32_t id) const { return sorted_index_[static_cast<size_t>(id)]; }
  // lcp()[i]: bytes shared by sorted()[i] and sorted()[i - 1] (0 for i = 0), capped at 65535.
  const std::vector<uint16_t>& lcp() const { return lcp_; }
  // The bytes of sorted()[index], from one buffer in sorted order: walks read it front to back
  // instead of chasing each token's own allocation.
  std::string_view sorted_bytes(size_t index) const {
    return std::string_view(sorted_blob_).substr(sorted_offsets_[index], sorted_offsets_[index + 1] - sorted_offsets_[index]);
  }
  // One bit per id with bytes: the mask of "every ordinary token".
  const std::vector<uint32_t>& ordinary_mask() const { return ordinary_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_ids_;
  std::vector<int32_t> sorted_;
  std::vector<int32_t> sorted_index_;
  std::vector<uint16_t> lcp_;
  std::string sorted_blob_;
  std::vector<uint32_t> sorted_offsets_;  // sorted_.size() + 1
  std::vector<uint32_t> ordinary_;
};

}  // namespace sanctum::grammar

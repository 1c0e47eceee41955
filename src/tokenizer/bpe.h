#pragma once
// Byte-pair-encoding model (tokenizer.json "model": {"type": "BPE"}): merges applied lowest rank first,
// leftmost first among equal ranks; ignore_merges, byte_fallback, unk_token with fuse_unk.
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sanctum {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept;
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class Bpe {
 public:
  struct Options {
    bool byte_fallback = false;
    bool fuse_unk = false;
    bool ignore_merges = false;
    bool raw_bytes = false;  // vocabulary keys are raw bytes (byte-level alphabet decoded at load)
    std::string unk_token;   // empty: none
  };
  struct Merge {
    int32_t left, right, rank, result;
  };

  // vocab: token -> id as stored (alphabet form). merges: (left, right) token pairs by rank.
  Bpe(const std::vector<std::pair<std::string, int32_t>>& vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      Options options);
  // Builds from an explicit merge table (tiktoken-style rank files): keys are model-internal strings.
  Bpe(TokenMap vocab, std::vector<Merge> merges, Options options);

  // Appends the ids of one pre-tokenized word (model-internal form: raw bytes in raw_bytes mode).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // Lookup by the model-internal form.
  int32_t find(std::string_view token) const;
  const Options& options() const { return options_; }

 private:
  void init_tables();
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  Options options_;
  TokenMap vocab_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (left,right) -> (rank, result)
  int32_t byte_ids_[256];                                             // raw_bytes mode: id of each single byte
  int32_t byte_fallback_[256];                                        // "<0xAB>" tokens, -1 when absent
  int32_t unk_id_ = -1;

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace sanctum

#pragma once
// The finished token mask of whole matcher states, so that a state seen before (by any matcher of
// the same compiled grammar) costs one hash lookup and one copy instead of combining context masks
// and walking the uncertain tokens. A state's key is its content, not arena ids: the accept flag,
// then each top's stack from the top down to the root, so equal keys mean equal stack sets and so
// equal masks. Bounded: entries are kept in least-recently-used order and the oldest go once their
// bytes pass the budget. Thread-safe.
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

namespace sanctum::grammar {

class Vocabulary;

class StateMaskCache {
 public:
  // 4 MiB: about 130 dense masks of a 248k vocabulary, far more sparse ones (a 400-token walk over
  // a real schema fills 35 KB at the median, 1.9 MB at most); 0 turns caching off.
  static constexpr size_t kDefaultBudgetBytes = size_t{4} << 20;
  // Keys past this many words (very deep stacks) are not cached: hashing them would cost more than
  // the walk they save.
  static constexpr size_t kMaxKeyWords = 4096;

  explicit StateMaskCache(size_t budget_bytes = kDefaultBudgetBytes) : budget_(budget_bytes) {}

  // Writes the cached mask of `key` into `mask` (vocab.mask_words() words); false on a miss.
  bool find(std::span<const uint32_t> key, std::span<uint32_t> mask, const Vocabulary& vocab);
  // Stores `mask` under `key`, evicting the least recently used entries past the budget.
  void insert(std::span<const uint32_t> key, std::span<const uint32_t> mask, const Vocabulary& vocab);

  size_t budget_bytes() const { return budget_; }
  size_t bytes() const;
  size_t entries() const;
  size_t hits() const;
  size_t misses() const;

 private:
  // The mask as the bits that differ from a base (no token, or every ordinary token), or whole.
  enum class Form : uint8_t { flips_from_none, flips_from_ordinary, bitset };
  struct Entry {
    uint64_t hash;
    std::vector<uint32_t> key;
    Form form;
    std::vector<uint32_t> data;  // flips: token ids, ascending; bitset: the mask words
    size_t bytes() const;
  };
  using Lru = std::list<std::shared_ptr<const Entry>>;  // most recent first

  static uint64_t hash_key(std::span<const uint32_t> key);
  static std::shared_ptr<const Entry> encode(uint64_t hash, std::span<const uint32_t> key, std::span<const uint32_t> mask,
                                             const Vocabulary& vocab);

  const size_t budget_;
  mutable std::mutex mutex_;
  Lru lru_;
  std::unordered_map<uint64_t, Lru::iterator> index_;
  size_t bytes_ = 0;
  size_t hits_ = 0, misses_ = 0;
};

}  // namespace sanctum::grammar

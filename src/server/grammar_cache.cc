#include "server/grammar_cache.h"

#include <algorithm>

namespace sanctum::server {

GrammarCache::GrammarCache(const Tokenizer& tokenizer, size_t vocab_size, std::vector<int32_t> eos_ids, size_t budget_bytes,
                           size_t capacity)
    : tokenizer_(tokenizer), vocab_size_(vocab_size), eos_ids_(std::move(eos_ids)), grammars_(budget_bytes, capacity) {
  if (budget_bytes < mask_budget_.bytes) {
    mask_budget_.bytes = budget_bytes;
    mask_budget_.state_bytes = std::min(mask_budget_.state_bytes, budget_bytes / 8);
  }
}

std::shared_ptr<const grammar::Vocabulary> GrammarCache::vocabulary(std::span<const int32_t> special_as_text) {
  std::vector<int32_t> key(special_as_text.begin(), special_as_text.end());
  std::sort(key.begin(), key.end());
  std::lock_guard<std::mutex> lock(vocab_mutex_);
  auto& v = vocabularies_[key];
  if (!v) v = grammar::Vocabulary::from_tokenizer(tokenizer_, vocab_size_, eos_ids_, key);
  return v;
}

}  // namespace sanctum::server

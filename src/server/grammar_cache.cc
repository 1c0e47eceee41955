#include "server/grammar_cache.h"

#include <algorithm>

namespace sanctum::server {

GrammarCache::GrammarCache(const Tokenizer& tokenizer, size_t vocab_size, std::vector<int32_t> eos_ids, size_t capacity)
    : tokenizer_(tokenizer), vocab_size_(vocab_size), eos_ids_(std::move(eos_ids)), capacity_(std::max<size_t>(1, capacity)) {}

std::shared_ptr<const grammar::Vocabulary> GrammarCache::vocabulary(std::span<const int32_t> special_as_text) {
  std::vector<int32_t> key(special_as_text.begin(), special_as_text.end());
  std::sort(key.begin(), key.end());
  std::lock_guard<std::mutex> lock(vocab_mutex_);
  auto& v = vocabularies_[key];
  if (!v) v = grammar::Vocabulary::from_tokenizer(tokenizer_, vocab_size_, eos_ids_, key);
  return v;
}

grammar::CompiledGrammar GrammarCache::get(const std::string& key, const std::function<grammar::CompiledGrammar()>& compile) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  grammar::CompiledGrammar g = compile();
  std::lock_guard<std::mutex> lock(mutex_);
  ++compiled_;
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;  // another thread compiled it meanwhile
  lru_.emplace_front(key, g);
  index_[key] = lru_.begin();
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return g;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lru_.size();
}

size_t GrammarCache::compiled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return compiled_;
}

}  // namespace sanctum::server

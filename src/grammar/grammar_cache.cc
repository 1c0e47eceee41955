#include "grammar/grammar_cache.h"

#include <algorithm>

namespace sanctum::grammar {

CompiledGrammarCache::CompiledGrammarCache(size_t budget_bytes, size_t max_grammars)
    : budget_bytes_(budget_bytes), max_grammars_(std::max<size_t>(1, max_grammars)) {}

CompiledGrammar CompiledGrammarCache::get(const std::string& key, const std::function<CompiledGrammar()>& compile) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      // The grammars grew since the last lookup: the bound is checked again at every one.
      trim_locked();
      return it->second->second;
    }
  }
  CompiledGrammar g = compile();
  std::lock_guard<std::mutex> lock(mutex_);
  ++compiled_;
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;  // another thread compiled it meanwhile
  lru_.emplace_front(key, g);
  index_[key] = lru_.begin();
  trim_locked();
  return g;
}

void CompiledGrammarCache::trim_locked() {
  size_t total = 0;
  for (const auto& [key, g] : lru_) total += g.memory_bytes();
  while (lru_.size() > 1 && (total > budget_bytes_ || lru_.size() > max_grammars_)) {
    total -= std::min(total, lru_.back().second.memory_bytes());
    index_.erase(lru_.back().first);
    lru_.pop_back();
    ++evicted_;
  }
}

CompiledGrammarCache::Stats CompiledGrammarCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats s;
  s.grammars = lru_.size();
  for (const auto& [key, g] : lru_) s.bytes += g.memory_bytes();
  s.compiled = compiled_;
  s.evicted = evicted_;
  return s;
}

}  // namespace sanctum::grammar

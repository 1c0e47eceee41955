#pragma once
// One served model's grammar side. Its vocabulary as grammars see it is built on the first
// constrained request (a pass over every token: never at startup, never twice), and the grammars
// requests compile are kept by their canonical text (kind, options, the schema as sent) in an LRU
// bounded by bytes and count (grammar/grammar_cache.h), so an agent that resends the same schema or
// tools compiles them once, and the token masks a grammar computes on first use stay warm for the
// next request. Thread-safe: HTTP threads compile.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_cache.h"
#include "grammar/vocabulary.h"

namespace sanctum {
class Tokenizer;
}

namespace sanctum::server {

class GrammarCache {
 public:
  // `vocab_size`: the model's (the mask width); `eos_ids`: the ids that end its generation;
  // `budget_bytes`: the cache's bound (--grammar-cache-mb, or the memory plan's share).
  GrammarCache(const Tokenizer& tokenizer, size_t vocab_size, std::vector<int32_t> eos_ids,
               size_t budget_bytes = grammar::CompiledGrammarCache::kDefaultBytes,
               size_t capacity = grammar::CompiledGrammarCache::kDefaultGrammars);

  // The mask budget of each grammar compiled for this cache: MaskBudget's default, or the cache's
  // whole bound where that is smaller (a smaller share keeps its eighth for whole-state masks).
  grammar::MaskBudget mask_budget() const { return mask_budget_; }

  // The vocabulary, with `special_as_text` special tokens written as their text (tool-call tags).
  std::shared_ptr<const grammar::Vocabulary> vocabulary(std::span<const int32_t> special_as_text = {});

  // The grammar cached under `key`, or compile() (run without the lock; it may throw) cached now.
  grammar::CompiledGrammar get(const std::string& key, const std::function<grammar::CompiledGrammar()>& compile) {
    return grammars_.get(key, compile);
  }

  size_t size() const { return grammars_.stats().grammars; }
  size_t compiled() const { return grammars_.stats().compiled; }  // misses so far (tests: a resent schema is not compiled again)
  grammar::CompiledGrammarCache::Stats stats() const { return grammars_.stats(); }

 private:
  const Tokenizer& tokenizer_;
  size_t vocab_size_;
  std::vector<int32_t> eos_ids_;

  std::mutex vocab_mutex_;  // held while a vocabulary is built: concurrent first requests wait for it
  std::map<std::vector<int32_t>, std::shared_ptr<const grammar::Vocabulary>> vocabularies_;

  grammar::CompiledGrammarCache grammars_;
  grammar::MaskBudget mask_budget_;
};

}  // namespace sanctum::server

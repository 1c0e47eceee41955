#pragma once
// One served model's grammar side. Its vocabulary as grammars see it is built on the first
// constrained request (a pass over every token: never at startup, never twice), and the grammars
// requests compile are kept by their canonical text (kind, options, the schema as sent) in a small
// LRU, so an agent that resends the same schema or tools compiles them once, and the token masks a
// grammar computes on first use stay warm for the next request. Thread-safe: HTTP threads compile.
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/vocabulary.h"

namespace sanctum {
class Tokenizer;
}

namespace sanctum::server {

class GrammarCache {
 public:
  // `vocab_size`: the model's (the mask width); `eos_ids`: the ids that end its generation.
  GrammarCache(const Tokenizer& tokenizer, size_t vocab_size, std::vector<int32_t> eos_ids, size_t capacity = 32);

  // The vocabulary, with `special_as_text` special tokens written as their text (tool-call tags).
  std::shared_ptr<const grammar::Vocabulary> vocabulary(std::span<const int32_t> special_as_text = {});

  // The grammar cached under `key`, or compile() (run without the lock; it may throw) cached now.
  grammar::CompiledGrammar get(const std::string& key, const std::function<grammar::CompiledGrammar()>& compile);

  size_t size() const;
  size_t compiled() const;  // misses so far (tests: a resent schema is not compiled again)

 private:
  const Tokenizer& tokenizer_;
  size_t vocab_size_;
  std::vector<int32_t> eos_ids_;
  size_t capacity_;

  std::mutex vocab_mutex_;  // held while a vocabulary is built: concurrent first requests wait for it
  std::map<std::vector<int32_t>, std::shared_ptr<const grammar::Vocabulary>> vocabularies_;

  mutable std::mutex mutex_;
  std::list<std::pair<std::string, grammar::CompiledGrammar>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  size_t compiled_ = 0;
};

}  // namespace sanctum::server

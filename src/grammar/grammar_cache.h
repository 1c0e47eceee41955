#pragma once
// Compiled grammars by their canonical text (kind, options, the schema as sent), so that a resent
// schema compiles once and the masks it computed on first use stay warm. Bounded by bytes and by
// count: after each lookup the least recently used grammars go until the rest hold at most
// `budget_bytes` (each one's memory_bytes(): the grammar, its masks, profiles and state masks) and
// number at most `max_grammars`. A cached grammar still grows as requests compute its masks, each
// within its own MaskBudget, so between two lookups the total can pass the bound by what the grammars
// in use computed meanwhile; a request that holds an evicted grammar keeps it until it finishes.
// Thread-safe: HTTP threads compile.
#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "grammar/compiled_grammar.h"

namespace sanctum::grammar {

class CompiledGrammarCache {
 public:
  // 256 MiB: eight grammars at their own bound (MaskBudget), hundreds of typical ones (1-3 MB at a
  // 248k vocabulary after a 400-token answer); far below the default prompt cache (1 GiB).
  static constexpr size_t kDefaultBytes = size_t{256} << 20;
  // Keeps each lookup's sum over the cache short.
  static constexpr size_t kDefaultGrammars = 128;

  explicit CompiledGrammarCache(size_t budget_bytes = kDefaultBytes, size_t max_grammars = kDefaultGrammars);

  // The grammar cached under `key`, or compile() (run without the lock; it may throw) cached now.
  CompiledGrammar get(const std::string& key, const std::function<CompiledGrammar()>& compile);

  struct Stats {
    size_t grammars = 0, bytes = 0;    // held now
    size_t compiled = 0, evicted = 0;  // so far: misses, and grammars dropped for the bounds
  };
  Stats stats() const;
  size_t budget_bytes() const { return budget_bytes_; }
  size_t max_grammars() const { return max_grammars_; }

 private:
  // Drops the least recently used grammars past the bounds; the most recent one stays.
  void trim_locked();

  const size_t budget_bytes_, max_grammars_;
  mutable std::mutex mutex_;
  std::list<std::pair<std::string, CompiledGrammar>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  size_t compiled_ = 0, evicted_ = 0;
};

}  // namespace sanctum::grammar

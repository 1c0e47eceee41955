#pragma once
// A grammar bound to a vocabulary, with cached token masks per stack context. A context is the
// top's terminal position plus the return positions of the k stack nodes below it; for it the tokens
// split into those accepted whatever lies further down (stored), those rejected whatever lies further
// down (dropped), and the ones that run past the k known levels (walked against the real stack at
// each step). k starts at 0 and grows while too many tokens stay uncertain (each level walks only the tokens
// the level above left uncertain): the top of a one-character
// rule says little, its string rule says a lot. Masks are computed on first use, thread-safe, and
// kept under a byte budget (MaskBudget): what is evicted is computed again, the same, on next use.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/mask_store.h"
#include "grammar/repeat_profile.h"
#include "grammar/state_mask_cache.h"
#include "grammar/vocabulary.h"

namespace sanctum::grammar {

struct PositionMask {
  enum class Form : uint8_t { accepted_ids, all_but_ids, bitset };
  Form form = Form::accepted_ids;
  std::vector<int32_t> ids;         // accepted_ids: the accepted ids; all_but_ids: ordinary ids not accepted
  std::vector<uint32_t> bits;       // bitset: the accepted ids
  std::vector<uint32_t> uncertain;  // sorted-vocabulary indices, ascending
  size_t accepted_count = 0;
  // Inside a counted repeat: also the first `profile_count` ids of a shared profile.
  std::shared_ptr<const RepeatProfile> profile;
  size_t profile_count = 0;

  // ORs the context-independent accepted tokens into `mask`.
  void apply(std::span<uint32_t> mask, const Vocabulary& vocab) const;
  size_t memory_bytes() const;
};

struct CompileStats {
  size_t rules = 0, elements = 0, terminals = 0;
  size_t masks_computed = 0, mask_bytes = 0, uncertain_tokens = 0;                 // context masks held now
  size_t state_masks = 0, state_mask_bytes = 0, state_hits = 0, state_misses = 0;  // the whole-state cache (StateMaskCache)
  size_t repeat_profiles = 0, repeat_profile_bytes = 0;                            // counted repeats (RepeatProfile)
  size_t evicted = 0;       // context masks and profiles dropped for the budget so far
  size_t memory_bytes = 0;  // CompiledGrammar::memory_bytes()
};

// The bytes a compiled grammar may hold in masks: context masks and repeat profiles (MaskStore) plus
// whole-state masks (StateMaskCache), which take `state_bytes` of `bytes`.
struct MaskBudget {
  // 32 MiB: above what every schema of tests/data/json_schemas holds after a 400-token walk at a
  // 248k vocabulary (at most 15.7 MB, all counted; bench/RESULTS.md), so served schemas keep their masks.
  static constexpr size_t kDefaultBytes = size_t{32} << 20;
  size_t bytes = kDefaultBytes;
  size_t state_bytes = StateMaskCache::kDefaultBudgetBytes;  // 0: no whole-state cache
};

// Context ends: the stack's bottom (the grammar completes there) or an unknown rest.
constexpr uint32_t kContextRoot = 0xFFFFFFFF;
constexpr uint32_t kContextOpen = 0xFFFFFFFE;

class CompiledGrammar {
 public:
  CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab, MaskBudget budget = {});

  const Grammar& grammar() const { return *impl_->grammar; }
  const Vocabulary& vocab() const { return *impl_->vocab; }
  // The mask of a context: positions top-first, ending in kContextRoot or kContextOpen. `base` is the
  // mask of the same context one level shallower (null at level 0): a deeper mask holds only the
  // tokens it adds, so a matcher applies every level it went through. `counted_at` > 0 says that
  // context[counted_at] is a counted repeat's return (Grammar::counted_return) and base is the mask
  // of the positions above it: the level then takes the repeat and its follower at once. The caller
  // holds the mask (and `base`) while it uses them: eviction only drops the cache's reference.
  std::shared_ptr<const PositionMask> mask_for(std::span<const uint32_t> context, const PositionMask* base, size_t counted_at = 0) const;
  // Computes the masks of every terminal position with an open context (the k = 0 level) now, so
  // that requests pay less on first use; returns the count.
  size_t precompute_all() const;
  CompileStats stats() const;
  // Bytes held now: the grammar, its context masks, profiles and whole-state masks (counters, no walk).
  size_t memory_bytes() const;
  // Finished masks of whole matcher states, shared by every matcher of this grammar.
  StateMaskCache& state_masks() const { return *impl_->state_masks; }

 private:
  struct Impl {
    std::shared_ptr<const Grammar> grammar;
    std::shared_ptr<const Vocabulary> vocab;
    std::vector<uint32_t> terminal_positions;
    size_t grammar_bytes = 0;
    std::unique_ptr<MaskStore> masks;  // context masks and repeat profiles
    std::unique_ptr<StateMaskCache> state_masks;
  };
  PositionMask counted_mask(std::span<const uint32_t> context, const PositionMask& base, size_t counted_at) const;
  std::shared_ptr<const RepeatProfile> profile_for(std::span<const uint32_t> context, const PositionMask& base, size_t counted_at) const;

  std::shared_ptr<Impl> impl_;
};

// Builds a context's mask by walking the whole vocabulary, or only base's uncertain tokens.
PositionMask compute_context_mask(const Grammar& grammar, const Vocabulary& vocab, std::span<const uint32_t> context,
                                  const PositionMask* base);
// Walks the tokens at `indices` (all of them when null) from `context` into a mask.
PositionMask walk_context_mask(const Grammar& grammar, const Vocabulary& vocab, std::span<const uint32_t> context,
                               const std::vector<uint32_t>* indices);

}  // namespace sanctum::grammar

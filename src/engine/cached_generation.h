#pragma once
// generate() on top of the prompt cache: continue from the longest cached prefix of the prompt,
// prefill only the rest, and leave snapshots for later requests. Hybrid models snapshot at aligned
// prompt positions while prefilling; attention-only models keep the whole sequence (prompt and
// output) at the end, since any prefix of it can be reused.
//
// Hybrid models and the next turn: the recurrent state that decode steps leave behind is rounded
// differently from the chunked prefill, so it is never stored. After the generation, a TailSnapshot
// rebuilds, by prefill from the prompt's aligned snapshot, the state that a prefill from scratch
// would have at the last aligned position of prompt + output, and stores it; the next turn of a
// chat or agent loop (whose prompt extends prompt + output) then continues from there. It is
// background work: callers run it after the response is delivered, one aligned step at a time.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/generator.h"
#include "engine/prefix_cache.h"

namespace sanctum {

class TailSnapshot {
 public:
  // Builds the state of `tokens` (whose length is an aligned position) from `base`, a snapshot of
  // the same sequence at an aligned position below it, or from an empty state when `base` is null.
  // Holds `base` weakly: the pool owns it, and work whose start was evicted is simply dropped.
  TailSnapshot(std::vector<int32_t> tokens, const std::shared_ptr<const SequenceState>& base);

  int64_t target() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t position() const { return working_ ? working_->length() : base_length_; }  // tokens built so far
  bool done() const { return done_; }
  bool stored() const { return stored_; }  // done, and the pool took the snapshot
  int64_t forwards() const { return forwards_; }
  int64_t prefilled() const { return prefilled_; }  // tokens its forwards ran, over all steps

  // One forward of at most PrefixCache::kAlign tokens, ending on an aligned position; at the target
  // the snapshot goes into the pool. Returns done(). The work ends without a forward when its start
  // was evicted, or when the pool already holds the target or a longer snapshot of the sequence.
  bool step(Model& model, PrefixCache& cache);
  // Someone else needs the model now: keep what was built so far in the pool (the request that
  // interrupts is often the next turn, which can continue from there) and let the working state go.
  void pause(PrefixCache& cache);
  // All steps at once (the CLI, tests). Returns stored().
  bool finish(Model& model, PrefixCache& cache);

 private:
  std::vector<int32_t> tokens_;
  std::weak_ptr<const SequenceState> base_;
  int64_t base_length_ = 0;
  bool base_empty_ = false;                 // start from a fresh state
  std::unique_ptr<SequenceState> working_;  // while a run of steps is under way
  std::vector<int64_t> stepping_stones_;    // lengths stored by pause(), replaced at the end
  int64_t forwards_ = 0, prefilled_ = 0;
  bool done_ = false, stored_ = false;
};

// The prompt cache's part in one sequence's generation: the state starts from the longest cached
// prefix of the prompt, the prefill leaves snapshots at aligned positions (params' snapshot hooks,
// which refer to this object: keep it in place while the run lasts), and after the run finish()
// stores what later requests can reuse. `cache` may be null: a fresh state, nothing stored. `prompt`
// is the cache's key: the prompt's tokens, image placeholders keyed by content (PrefixCache::image_key);
// a prompt with images leaves its prefill through the last image to the caller (Engine::prefill_images).
class PromptCacheUse {
 public:
  // found (optional): the cache's find() for this prompt, which it restores (PrefixCache::acquire).
  PromptCacheUse(Model& model, PrefixCache* cache, std::span<const int32_t> prompt, SequenceState& state, GenerationParams& params,
                 const PrefixCache::Hit* found = nullptr);
  PromptCacheUse(const PromptCacheUse&) = delete;
  PromptCacheUse& operator=(const PromptCacheUse&) = delete;

  int64_t reused() const { return reused_; }  // prompt tokens the state starts with
  // The prompt-cache entry the state was restored from (PrefixCache::Hit::entry; its first reused()
  // rows are that entry's), 0 when it started empty.
  uint64_t restored_from() const { return restored_from_; }
  // After the run (`state` as it left it): attention-only models store the whole sequence; a hybrid
  // one hands `tail` (optional) the work that builds its end-of-generation snapshot.
  void finish(const GenerationResult& result, SequenceState& state, std::unique_ptr<TailSnapshot>* tail);

 private:
  PrefixCache* cache_;
  std::vector<int32_t> prompt_;
  int64_t reused_ = 0;
  uint64_t restored_from_ = 0;
  // Hybrid models: the last aligned snapshot of this prompt, where an end-of-generation snapshot
  // starts (null with base_known_: the empty state).
  std::shared_ptr<const SequenceState> base_;
  bool base_known_ = false;
};

// generate() with a PromptCacheUse around it. `cache` may be null (plain generation). result.prompt_tokens counts the whole prompt;
// `reused_tokens` (optional) receives how many of them came from the cache. On a hybrid model,
// `tail` (optional) receives the work that builds the end-of-generation snapshot (null when there
// is none: no aligned position past the prompt's, or a cancelled generation); without `tail` no
// such snapshot is made.
GenerationResult generate_with_cache(Model& model, PrefixCache* cache, std::span<const int32_t> prompt, GenerationParams params,
                                     const TokenCallback& on_tokens = {}, int64_t* reused_tokens = nullptr,
                                     std::unique_ptr<TailSnapshot>* tail = nullptr);

}  // namespace sanctum

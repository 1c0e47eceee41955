#include "engine/cached_generation.h"

#include <vector>

namespace sanctum {

GenerationResult generate_with_cache(Model& model, PrefixCache* cache, std::span<const int32_t> prompt, GenerationParams params,
                                     const TokenCallback& on_tokens, int64_t* reused_tokens) {
  SequenceState state;
  int64_t reused = 0;
  if (cache) {
    reused = cache->acquire(model, prompt, state);
    params.snapshot_at = PrefixCache::snapshot_points(state, static_cast<int64_t>(prompt.size()));
    params.on_snapshot = [&](const SequenceState& s) { cache->store(prompt, s); };
  } else {
    state = model.new_state();
  }
  if (reused_tokens) *reused_tokens = reused;
  GenerationResult result = generate(model, state, prompt.subspan(static_cast<size_t>(reused)), params, on_tokens);
  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (cache && !state.has_recurrent_state()) {
    std::vector<int32_t> sequence(prompt.begin(), prompt.end());
    sequence.insert(sequence.end(), result.tokens.begin(), result.tokens.end());
    cache->store(sequence, state);
  }
  return result;
}

}  // namespace sanctum

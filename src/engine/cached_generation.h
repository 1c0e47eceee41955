#pragma once
// generate() on top of the prompt cache: continue from the longest cached prefix of the prompt,
// prefill only the rest, and leave snapshots for later requests. Hybrid models snapshot at aligned
// prompt positions while prefilling; attention-only models keep the whole sequence (prompt and
// output) at the end, since any prefix of it can be reused.
#include <span>

#include "engine/generator.h"
#include "engine/prefix_cache.h"

namespace sanctum {

// `cache` may be null (plain generation). result.prompt_tokens counts the whole prompt;
// `reused_tokens` (optional) receives how many of them came from the cache.
GenerationResult generate_with_cache(Model& model, PrefixCache* cache, std::span<const int32_t> prompt, GenerationParams params,
                                     const TokenCallback& on_tokens = {}, int64_t* reused_tokens = nullptr);

}  // namespace sanctum

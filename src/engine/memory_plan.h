#pragma once
// What a served model's memory is made of, computed at startup from its shapes and the serve
// flags (printed, and exposed on /health and /metrics), and --memory-limit-mb: the bounds of the
// prompt caches and of the running sequences' state that a whole-process limit leaves room for.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace sanctum {

class Model;

struct MemoryPlan {
  size_t weights = 0;                 // the checkpoint's tensors (mapped on the CPU, uploaded to a GPU)
  size_t kv_per_token = 0;            // one sequence's KV cache per token (in --kv-cache-dtype)
  size_t recurrent_per_sequence = 0;  // one sequence's GatedDeltaNet conv + recurrent state
  int64_t kv_block_rows = 256;        // rows a KV cache commits at a time (KvCache::commit_rows)
  bool kv_blocks_shared = false;      // a cache continuing a snapshot maps its whole blocks (KvCache::maps_shared_rows)
  // The running sequences' state at their longest (0: unbounded), each sequence's KV counted in the
  // whole blocks that its cache commits (KvCache::commit_rows: 256 rows, or a GPU's granules; a GPU
  // cache whose rows cannot map granules grows by copying into room for half again as many).
  size_t state_bound = 0;
  size_t prompt_cache = 0;   // the prompt cache's bound (0: off)
  size_t grammar_cache = 0;  // the server's compiled grammars and their masks (0 where none is kept)
  size_t scratch = 0;        // estimated activations of one forward of a prefill piece
  // Under --memory-limit-mb with neither bound given: the running sequences may take the prompt
  // cache's share too (the cache gives entries back before a new sequence waits).
  bool cache_yields_to_state = false;

  // All parts; meaningless while the state is unbounded (bounded() false).
  size_t total() const { return weights + state_bound + prompt_cache + grammar_cache + scratch; }
  bool bounded() const { return state_bound > 0; }
  nlohmann::json to_json() const;  // MiB per part, for logs and /health
};

// The plan of a loaded model under the given bounds; `piece` is the prompt tokens per forward.
MemoryPlan plan_memory(const Model& model, size_t state_bound, size_t prompt_cache, int64_t piece);

// --memory-limit-mb: shares what the process itself (`process`: its memory besides every model's
// part, counted once) and the weights and scratch of every model leave under `limit`, equally among
// the models, between the grammar caches (an eighth, at most their planned bound, unless given), the
// prompt caches (a quarter of the rest, unless given) and the state bounds (the rest, unless given);
// with neither of the last two given, the prompt cache yields its quarter to the state when needed.
// Throws invalid_argument naming the numbers when the process, weights and scratch alone do not fit,
// or when the given bounds pass the limit.
void fit_memory_limit(std::vector<MemoryPlan>& plans, size_t limit, bool state_given, bool cache_given, bool grammar_given = false,
                      size_t process = 0);

// The process's own resident memory besides the weights, once every model is loaded: code,
// libraries, tokenizers, the allocator's arenas. `resident` less `weights_resident`, the weights'
// pages resident now (their mapped files' and their copies'; the weights' part of the plan covers
// them, resident or not yet).
size_t process_memory(size_t resident, size_t weights_resident);

}  // namespace sanctum

#include "engine/memory_plan.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "base/tuning.h"
#include "model/model.h"
#include "model/state.h"
#include "ops/kv_format.h"

namespace sanctum {

namespace {

constexpr size_t kMiB = size_t{1} << 20;

double mib(size_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kMiB); }
std::string mib_text(size_t bytes) { return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB"; }

// f32 activations of `piece` tokens through one layer (the widest of attention and feed-forward
// buffers, a few of each alive at once) plus the logits of the rows that need them, plus the bf16
// keys a CPU prefill reads transposed (ops/kv_format.h: bounded, and no more than the context).
size_t scratch_estimate(const ModelConfig& c, int64_t piece) {
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  const int64_t linear = c.linear_num_key_heads * c.linear_key_head_dim * 2 + c.linear_num_value_heads * c.linear_value_head_dim * 2;
  const int64_t ffn = std::max(c.intermediate_size,
                               c.moe_intermediate_size * std::max<int64_t>(1, c.num_experts_per_tok) + c.shared_expert_intermediate_size);
  const int64_t per_token = 4 * c.hidden_size + std::max(2 * q + 2 * kv, linear) + 3 * ffn;
  const int64_t transposed_keys =
      std::min(ops::kMaxTransposedKeyBytes, std::max<int64_t>(c.max_position_embeddings, piece) * kv * static_cast<int64_t>(sizeof(float)));
  return static_cast<size_t>(piece * per_token + c.vocab_size) * sizeof(float) + static_cast<size_t>(transposed_keys);
}

}  // namespace

nlohmann::json MemoryPlan::to_json() const {
  nlohmann::json j = {{"weights_mib", mib(weights)},
                      {"kv_per_token_kib", static_cast<double>(kv_per_token) / 1024.0},
                      {"kv_cache_dtype", ops::kv_cache_dtype_name(ops::kv_cache_dtype())},
                      {"recurrent_per_sequence_mib", mib(recurrent_per_sequence)},
                      {"prompt_cache_mib", mib(prompt_cache)},
                      {"grammar_cache_mib", mib(grammar_cache)},
                      {"scratch_mib", mib(scratch)}};
  j["state_bound_mib"] = bounded() ? nlohmann::json(mib(state_bound)) : nlohmann::json(nullptr);
  j["total_mib"] = bounded() ? nlohmann::json(mib(total())) : nlohmann::json(nullptr);
  j["cache_yields_to_state"] = cache_yields_to_state;
  return j;
}

MemoryPlan plan_memory(const Model& model, size_t state_bound, size_t prompt_cache, int64_t piece) {
  const ModelConfig& c = model.config();
  MemoryPlan p;
  p.weights = c.checkpoint_bytes;
  p.recurrent_per_sequence = model.new_state().bytes();
  for (const LayerConfig& layer : c.layers)
    if (layer.mixer == MixerKind::attention)
      p.kv_per_token += KvCache::bytes_per_token(c.num_key_value_heads, c.head_dim, ops::kv_cache_dtype());
  {
    const ScopedTuning use(c.tuning);  // kv_shared_pages picks a GPU cache's storage
    p.kv_block_rows = KvCache::commit_rows(c.num_key_value_heads, c.head_dim, c.device, ops::kv_cache_dtype());
    p.kv_blocks_shared = KvCache::maps_shared_rows(c.num_key_value_heads, c.head_dim, c.device, ops::kv_cache_dtype());
  }
  p.state_bound = state_bound;
  p.prompt_cache = prompt_cache;
  p.scratch = scratch_estimate(c, piece);
  return p;
}

size_t process_memory(size_t resident, size_t weights_resident) { return resident > weights_resident ? resident - weights_resident : 0; }

void fit_memory_limit(std::vector<MemoryPlan>& plans, size_t limit, bool state_given, bool cache_given, bool grammar_given,
                      size_t process) {
  size_t fixed = process;
  for (const MemoryPlan& p : plans)
    fixed += p.weights + p.scratch + (state_given ? p.state_bound : 0) + (cache_given ? p.prompt_cache : 0) +
             (grammar_given ? p.grammar_cache : 0);
  const bool any_given = state_given || cache_given || grammar_given;
  check(fixed < limit, ErrorKind::invalid_argument,
        "--memory-limit-mb " + mib_text(limit) + ": the process (" + mib_text(process) + " besides the models), the weights and scratch" +
            (any_given ? " and the given bounds" : "") + " alone need " + mib_text(fixed) + "; raise the limit" +
            (any_given ? " or lower --kv-cache-mb / --prompt-cache-mb / --grammar-cache-mb" : ""));
  const size_t left = (limit - fixed) / plans.size();
  for (MemoryPlan& p : plans) {
    if (!grammar_given) p.grammar_cache = std::min(p.grammar_cache, left / 8);
    const size_t share = left - (grammar_given ? 0 : p.grammar_cache);
    if (!cache_given) p.prompt_cache = state_given ? share : share / 4;
    if (!state_given) p.state_bound = share - (cache_given ? 0 : p.prompt_cache);
    p.cache_yields_to_state = !state_given && !cache_given;
    // A bound that cannot hold one sequence of a single token's state (one block) is no bound at all.
    check(p.state_bound >= p.recurrent_per_sequence + static_cast<size_t>(p.kv_block_rows) * p.kv_per_token, ErrorKind::invalid_argument,
          "--memory-limit-mb " + mib_text(limit) + " leaves " + mib_text(p.state_bound) +
              " for the running sequences' state, less than one sequence needs; raise the limit");
  }
}

}  // namespace sanctum

#pragma once
// Adapters served unmerged, per request: an adapter bound to one model's projections (ServedLora),
// and the add each projection runs after its base matmul, y += scale · (x · Aᵀ) · Bᵀ, on the rows of
// the sequences that chose that adapter only (a sequence's state carries its choice). The base
// weights are never touched, so one batch mixes sequences with different adapters and with none.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/blocks/batch_rows.h"
#include "model/blocks/block_output.h"
#include "tensor/tensor.h"
#include "weights/adapters/lora_adapter.h"

namespace sanctum {

// A projection the per-row path can adapt: its module path in the checkpoint and its shape.
struct LoraModule {
  int64_t out = 0, in = 0;
};
using LoraModules = std::map<std::string, LoraModule>;  // "model.layers.0.self_attn.q_proj" -> shape

struct ServedLora {
  std::string name;                            // what requests name (BASE:NAME)
  uint64_t id = 0;                             // distinct for every binding: prompt-cache keys carry it
  std::shared_ptr<const LoraAdapter> adapter;  // owns the tensors the targets point into
  std::unordered_map<std::string, const LoraTarget*> by_module;
  int64_t max_rank = 0;

  const LoraTarget* find(const std::string& module) const {
    auto it = by_module.find(module);
    return it == by_module.end() ? nullptr : it->second;
  }
};

// Binds `adapter` to a model whose adaptable projections are `modules`, whose checkpoint (in `dir`)
// holds the tensors `checkpoint_names`. Throws sanctum::Error naming the adapter tensor for: a target
// on no module of the checkpoint (place_adapter), one on a module the per-row path does not adapt
// (MoE experts, the LM head: merge those with --adapter), a shape that disagrees with the module, a
// rank above `max_rank` (--max-lora-rank), and DoRA (its per-row form needs the merged weight's norms:
// merge it with --adapter).
std::shared_ptr<const ServedLora> bind_lora(const std::string& name, std::shared_ptr<const LoraAdapter> adapter, const LoraModules& modules,
                                            const std::vector<std::string>& checkpoint_names, const std::string& dir, int64_t max_rank);

// y (n, out) = x (n, in) · Wᵀ was just computed over the batch's rows for projection `module`: adds
// each sequence's adapter term to its rows. Sequences without an adapter, or whose adapter does not
// target `module`, keep the base output.
void add_row_lora(const BatchRows& batch, const std::string& module, const Tensor& x, Tensor& y);
// The same for a block's last projection, into its output's delta.
void add_row_lora(const BatchRows& batch, const std::string& module, const Tensor& x, const BlockOutput& out);

// Whether any sequence of the batch has an adapter (the blocks skip the per-row pass otherwise).
bool batch_has_lora(const BatchRows& batch);

}  // namespace sanctum

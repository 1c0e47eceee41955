#include "model/blocks/row_lora.h"

#include "base/error.h"
#include "ops/lora.h"
#include "weights/adapters/adapter_targets.h"

namespace sanctum {

namespace {
std::atomic<uint64_t> next_lora_id{1};
}

std::shared_ptr<const ServedLora> bind_lora(const std::string& name, std::shared_ptr<const LoraAdapter> adapter, const LoraModules& modules,
                                            const std::vector<std::string>& checkpoint_names, const std::string& dir, int64_t max_rank) {
  check(adapter != nullptr, ErrorKind::internal, "bind_lora: no adapter");
  const std::string& file = adapter->weights_path();
  const AdapterPlacement placement = place_adapter(*adapter, checkpoint_names, dir);
  auto served = std::make_shared<ServedLora>();
  served->name = name;
  served->id = next_lora_id.fetch_add(1);
  served->max_rank = max_rank;
  for (const auto& [module, target] : placement) {
    check(!target->magnitude, ErrorKind::unsupported,
          file + ": tensor '" + target->m_name + "' makes '" + name +
              "' a DoRA adapter, which is served merged only: load it with --adapter NAME=" + adapter->dir() + " instead of --lora");
    auto it = modules.find(module);
    check(it != modules.end() && target->experts == 0, ErrorKind::unsupported,
          file + ": tensor '" + target->a_name + "' adapts '" + module +
              "', which the per-request path does not cover (it adapts the attention, GatedDeltaNet and MLP projections and a MoE "
              "block's shared expert, not routed experts or the LM head): merge this adapter with --adapter NAME=" +
              adapter->dir());
    check(target->out == it->second.out && target->in == it->second.in, ErrorKind::invalid_input,
          file + ": tensors '" + target->a_name + "' / '" + target->b_name + "' are for a (" + std::to_string(target->out) + ", " +
              std::to_string(target->in) + ") projection, but '" + module + "' of " + dir + " is (" + std::to_string(it->second.out) +
              ", " + std::to_string(it->second.in) + "): an adapter for another model");
    check(target->rank <= max_rank, ErrorKind::invalid_input,
          file + ": tensor '" + target->a_name + "' has rank " + std::to_string(target->rank) + ", above --max-lora-rank " +
              std::to_string(max_rank) + ": raise --max-lora-rank or retrain with a smaller rank");
    served->by_module.emplace(module, target);
  }
  check(!served->by_module.empty(), ErrorKind::invalid_input, file + ": the adapter has no targets");
  served->adapter = std::move(adapter);
  return served;
}

bool batch_has_lora(const BatchRows& batch) {
  for (const SequenceRows& s : batch.sequences)
    if (s.state->lora() != nullptr) return true;
  return false;
}

void add_row_lora(const BatchRows& batch, const std::string& module, const Tensor& x, Tensor& y) {
  for (const SequenceRows& s : batch.sequences) {
    const ServedLora* lora = s.state->lora();
    if (lora == nullptr) continue;
    const LoraTarget* t = lora->find(module);
    if (t == nullptr) continue;
    Tensor y_rows = y.slice(0, s.begin, s.end);
    ops::lora_add(x.slice(0, s.begin, s.end), t->a, t->b, t->scale, y_rows);
  }
}

void add_row_lora(const BatchRows& batch, const std::string& module, const Tensor& x, const BlockOutput& out) {
  if (!batch_has_lora(batch)) return;
  check(!out.into_residual(), ErrorKind::internal, "add_row_lora: '" + module + "' wrote into the residual stream");
  add_row_lora(batch, module, x, out.delta());
}

}  // namespace sanctum

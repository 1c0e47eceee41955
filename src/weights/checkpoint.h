#pragma once
// A checkpoint directory: config.json plus safetensors (one file, or shards listed by
// model.safetensors.index.json). Tensors are views into the memory-mapped files (no copies).
// Every accessor validates what it returns and throws sanctum::Error with a one-line message that
// names the file and the tensor.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/pinned_file.h"
#include "base/tuning.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"
#include "weights/adapters/adapter_targets.h"
#include "weights/adapters/lora_adapter.h"
#include "weights/quant_config.h"
#include "weights/safetensors.h"

namespace sanctum {

class Checkpoint {
 public:
  // Opens every safetensors file of dir (index.json if present, else model.safetensors, else all
  // *.safetensors sorted by name). Throws not_found if there is none. With `verified` (the files a
  // manifest check held open) it reads those descriptors only, and refuses the load when any
  // verified file was replaced, removed or written since, or when it needs a file the check did not
  // verify: what is mapped is what was hashed.
  explicit Checkpoint(const std::string& dir, const PinnedFiles* verified = nullptr);

  const std::string& dir() const { return dir_; }
  std::vector<std::string> names() const;  // all tensor names, sorted
  bool has(const std::string& name) const;
  // dtype/shape of `name` without mapping or marking it used (to detect a checkpoint's flavour).
  // Throws not_found naming it.
  const SafetensorsEntry& entry(const std::string& name) const;

  // Where tensor()/linear()/experts() place what they return: views of the mapped files (cpu), or
  // copies uploaded once to the GPU (each name at most once, so tied weights stay shared).
  void set_device(Device device) { device_ = device; }
  Device device() const { return device_; }
  // The tuning of the model being loaded, for the choices made at load (stacked projections).
  void set_tuning(const Tuning& tuning) { tuning_ = tuning; }
  const Tuning& tuning() const { return tuning_; }

  // Lets go of the GPU copy of `name` held for later calls (references already handed out stay
  // valid): for weights a model rebuilt in another layout, so their memory is freed with the model's
  // last reference rather than kept until the checkpoint closes.
  void release_upload(const std::string& name) { uploaded_.erase(name); }

  // Folds `adapter` into the weights this checkpoint hands out: its targets are placed on modules now
  // (throws naming the adapter tensor when one has no module, see place_adapter), and from then on
  // tensor() returns the merged `.weight` / `.scales` / `.biases` of those modules, owned copies
  // instead of views (uploaded on a GPU), so linear(), experts() and the stacks built from them all
  // carry the adapter. One adapter per checkpoint.
  void attach_adapter(std::shared_ptr<const LoraAdapter> adapter);

  // The tensor `name`; marks it used. Throws not_found naming it (and the directory) if absent.
  Tensor tensor(const std::string& name);
  // The tensor `name` of any rank as a 1-D view of its elements on the host (entry() gives the
  // shape): for ranks above a Tensor's, such as a Conv3d kernel; marks it used.
  Tensor flat_tensor(const std::string& name);
  // Same, and checks the shape; throws invalid_input "tensor X: expected (a, b), got (c, d) bf16".
  Tensor tensor(const std::string& name, std::initializer_list<int64_t> expected_shape);

  // A linear weight of logical shape (rows, cols) at `prefix` (".weight", and for quantized layers
  // ".scales" / ".biases"). Quantized if `prefix.scales` exists; bits/group size come from `quant`
  // (per-layer overrides honoured) and are cross-checked against the packed shape.
  Weight linear(const std::string& prefix, int64_t rows, int64_t cols, const QuantConfig& quant);

  // Per-expert linears from one 3-D grid (num_experts, rows, cols): mlx `switch_mlp.*` (prefix.weight,
  // with prefix.scales / prefix.biases when quantized) or HF fused grids stored under the bare name
  // (`mlp.experts.gate_up_proj`). Each Weight views its expert's slice; nothing is copied.
  std::vector<Weight> experts(const std::string& prefix, int64_t num_experts, int64_t rows, int64_t cols, const QuantConfig& quant);

  // Names present in the files but never requested, minus those under ignored prefixes.
  std::vector<std::string> unused() const;
  void ignore_prefix(const std::string& prefix) { ignored_prefixes_.push_back(prefix); }
  // Throws invalid_input listing (up to 5) unexpected tensors if unused() is not empty, or naming an
  // adapter target the model never read.
  void check_all_used() const;

  // Total bytes of all mapped files.
  size_t file_bytes() const;

 private:
  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<size_t, size_t>> index_;  // name -> (file index, entry index)
  std::set<std::string> used_;
  std::vector<std::string> ignored_prefixes_;
  Device device_ = Device::cpu;
  Tuning tuning_;
  std::map<std::string, Tensor> uploaded_;
  std::shared_ptr<const LoraAdapter> adapter_;
  AdapterPlacement placement_;
  std::map<std::string, Tensor> merged_;  // "X.weight" / "X.scales" / "X.biases" of adapted modules, host copies

  Tensor view(const std::string& name) const;  // the mapped tensor, unmerged and not marked used
  // The merged piece `name` when it belongs to an adapted module (merging that module on first use), else empty.
  Tensor merged(const std::string& name);

  std::string file_of(const std::string& name) const;  // the shard holding name, for messages
};

}  // namespace sanctum

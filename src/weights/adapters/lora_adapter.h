#pragma once
// A LoRA / DoRA adapter read once from either format (mlx-lm or PEFT, adapter_config.h), held per
// target module in one layout whatever the source: A (rank, in), B (out, rank), the effective scale,
// and DoRA's magnitude (out). Merging at load (lora_merge.h) is one consumer; a per-request low-rank
// path can be another, which is why nothing here knows about checkpoints.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/pinned_file.h"
#include "tensor/tensor.h"
#include "weights/adapters/adapter_config.h"

namespace sanctum {

struct LoraTarget {
  std::string module;                  // module path as the adapter names it, e.g. "model.layers.3.self_attn.q_proj"
  std::string file;                    // the adapter's weights file, for messages
  std::string a_name, b_name, m_name;  // tensor names in that file
  int64_t experts = 0;                 // 0: one linear; E: a switch layer's per-expert stacks
  int64_t rank = 0, in = 0, out = 0;
  Tensor a;          // f32 (rank, in), or (E, rank, in)
  Tensor b;          // f32 (out, rank), or (E, out, rank)
  Tensor magnitude;  // DoRA: f32 (out); empty for LoRA
  float scale = 0;   // W' = W + scale * B A
};

class LoraAdapter {
 public:
  // Reads dir/adapter_config.json and the tensors (adapters.safetensors for mlx-lm,
  // adapter_model.safetensors for PEFT). With `verified` (a manifest check of dir) it reads those
  // descriptors only. Throws sanctum::Error naming the file and tensor for: a missing config or
  // weights file, a truncated safetensors, an unknown fine_tune_type, a rank in the config that the
  // tensors contradict, a non-finite scale or tensor, an A without its B, a stray tensor.
  static std::shared_ptr<const LoraAdapter> load(const std::string& dir, const PinnedFiles* verified = nullptr);

  const std::string& dir() const { return dir_; }
  const std::string& weights_path() const { return weights_path_; }
  const AdapterConfig& config() const { return config_; }
  const std::map<std::string, LoraTarget>& targets() const { return targets_; }

 private:
  std::string dir_, weights_path_;
  AdapterConfig config_;
  std::map<std::string, LoraTarget> targets_;  // by module path
};

}  // namespace sanctum

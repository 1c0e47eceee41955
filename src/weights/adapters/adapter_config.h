#pragma once
// adapter_config.json of a LoRA / DoRA adapter, in either format sanctum reads:
//   mlx-lm: {"fine_tune_type": "lora"|"dora", "num_layers": N, "lora_parameters": {"rank", "scale",
//            "dropout", "keys"}}                                   beside adapters.safetensors
//   PEFT:   {"peft_type": "LORA", "r", "lora_alpha", "target_modules", "rank_pattern", "alpha_pattern",
//            "use_rslora", "use_dora", "fan_in_fan_out", "layers_to_transform", "layers_pattern",
//            "modules_to_save", "bias"}                           beside adapter_model.safetensors
// Every field that changes the math is honoured or refused by name; dropout (training only) is ignored.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sanctum {

enum class AdapterFormat { mlx_lm, peft };

struct AdapterConfig {
  AdapterFormat format = AdapterFormat::mlx_lm;
  std::string path;  // the config file, named in errors
  bool dora = false;

  // mlx-lm
  int num_layers = -1;                           // the last N transformer layers carry the adapter; -1: all
  int rank = 0;                                  // also PEFT's r
  float scale = 0;                               // mlx-lm's scale; PEFT's is lora_alpha / r (or / sqrt(r)) per module
  std::optional<std::vector<std::string>> keys;  // module paths inside a layer ("self_attn.q_proj")

  // PEFT
  float alpha = 0;
  bool rslora = false;
  std::vector<std::string> target_modules;  // names matched as suffixes ...
  std::optional<std::string> target_regex;  // ... or one regular expression over the full module path
  bool all_linear = false;                  // "all-linear": every linear but the output layer
  std::map<std::string, int> rank_pattern;
  std::map<std::string, float> alpha_pattern;
  std::vector<int> layers_to_transform;  // empty: every layer
  std::vector<std::string> layers_pattern;

  // The rank and scale a PEFT module path ("model.layers.0.self_attn.q_proj") gets from the
  // patterns; for mlx-lm, the config's rank and scale.
  int rank_for(const std::string& module) const;
  float scale_for(const std::string& module) const;
  // Whether the config says `module` carries the adapter (target_modules, keys, num_layers,
  // layers_to_transform), with `n_layers` the model's layer count (for num_layers). When it does not,
  // `why` says which field excludes it.
  bool targets(const std::string& module, int n_layers, std::string* why) const;
};

// The layer index in a module path ("...layers.7.mlp..." -> 7), or -1.
int layer_index_of(const std::string& module);

// Parses config text read from `path` (named in every error). Throws sanctum::Error naming the field
// for anything missing, mistyped, refused (modules_to_save, bias, fan_in_fan_out, full fine-tunes) or
// out of range (rank <= 0, a scale that is not finite).
AdapterConfig parse_adapter_config(const std::string& text, const std::string& path, AdapterFormat format);

}  // namespace sanctum

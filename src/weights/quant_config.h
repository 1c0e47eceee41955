#pragma once
// The MLX `quantization` block of config.json (also accepted under `quantization_config`):
//   {"group_size": 64, "bits": 4, "model.layers.0.mlp.gate": false, "lm_head": {"bits": 8, "group_size": 64}}
// Keys other than group_size / bits / mode are per-layer overrides by module path.
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tensor/weight.h"

namespace sanctum {

struct QuantConfig {
  QuantParams defaults;                                         // bits == 0: not a quantized checkpoint
  std::map<std::string, std::optional<QuantParams>> per_layer;  // nullopt: that layer is not quantized

  bool quantized() const { return defaults.bits != 0; }
  // Params for module path `prefix` (e.g. "model.layers.3.self_attn.q_proj"); bits == 0 if dense.
  QuantParams for_layer(const std::string& prefix) const;

  // Throws invalid_input / unsupported naming the key (mode other than "affine", bits not 4/8, ...).
  static QuantConfig from_json(const nlohmann::json& config);
};

}  // namespace sanctum

#pragma once
// ModelConfig: the parsed config.json (+ generation_config.json) of a checkpoint.
// - VL checkpoints nest text fields under `text_config`; they are flattened into the root, and a key
//   present at both levels keeps the root's value.
// - RoPE comes either in the classic form (rope_theta, rope_scaling{type|rope_type, factor, ...},
//   partial_rotary_factor) or as transformers 5's `rope_parameters` object (which may also carry
//   partial_rotary_factor, mrope_section, mrope_interleaved).
// Missing required keys throw sanctum::Error: "config.json: missing key 'hidden_size'".
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/tuning.h"
#include "ops/rope.h"
#include "weights/quant_config.h"

namespace sanctum {

enum class MixerKind { attention, gated_delta_net };
enum class FfnKind { dense, moe };

struct LayerConfig {
  MixerKind mixer = MixerKind::attention;
  FfnKind ffn = FfnKind::dense;
};

struct ModelConfig {
  std::string dir;
  std::string model_type;
  Device device = Device::cpu;  // where the model's weights, scratch and state live (set by load_model)
  Tuning tuning;                // the optimizations this model runs with (set by load_model; base/tuning.h)
  nlohmann::json raw;           // flattened config.json

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // explicit, or hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  // The loaded model runs a vision tower: requests may carry images (set by the loader that loads one).
  bool has_vision = false;
  int64_t max_position_embeddings = 0;
  ops::RopeConfig rope;            // head_dim and rotary_dim filled in
  std::vector<int> mrope_section;  // empty unless the checkpoint declares multimodal RoPE
  bool mrope_interleaved = false;

  // Hybrid / MoE (filled when present; architectures validate what they need).
  std::vector<LayerConfig> layers;  // num_hidden_layers entries
  int64_t linear_num_key_heads = 0, linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0, linear_value_head_dim = 0, linear_conv_kernel_dim = 0;
  int64_t num_experts = 0, num_experts_per_tok = 0, moe_intermediate_size = 0, shared_expert_intermediate_size = 0;
  bool norm_topk_prob = true;

  std::vector<int32_t> eos_token_ids;  // union of config.json and generation_config.json
  int32_t bos_token_id = -1;
  QuantConfig quant;

  // Typed access to raw keys with errors that name the key.
  int64_t require_int(const std::string& key) const;
  int64_t int_or(const std::string& key, int64_t fallback) const;
  double double_or(const std::string& key, double fallback) const;
  bool bool_or(const std::string& key, bool fallback) const;
};

// Reads dir/config.json and, if present, dir/generation_config.json.
ModelConfig load_model_config(const std::string& dir);
// Same from JSON text (for tests and fuzzing); generation_config may be empty.
ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_config_json,
                               const std::string& dir = "<memory>");

}  // namespace sanctum

#pragma once
// The vision tower's part of a VL checkpoint's config.json (`vision_config`, Qwen3-VL / Qwen3.5 form)
// and the image token ids at its root.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "ops/gelu.h"

namespace sanctum {

struct VisionConfig {
  int64_t depth = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_heads = 0;
  int64_t in_channels = 3;
  int64_t patch_size = 16;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t out_hidden_size = 0;
  int64_t num_position_embeddings = 0;
  double rope_theta = 10000.0;
  ops::GeluKind hidden_act = ops::GeluKind::tanh;  // the blocks' MLP; the merger's is always erf
  int32_t image_token_id = -1;
  int32_t vision_start_token_id = -1;

  int64_t head_dim() const { return hidden_size / num_heads; }
  int64_t patch_values() const { return in_channels * temporal_patch_size * patch_size * patch_size; }  // one pixel_values row
  int64_t grid_side() const;  // the learned position table's side: sqrt(num_position_embeddings)
};

// From the root of config.json (vision_config plus image_token_id / image_token_index,
// vision_start_token_id); `label` names the file in errors, which name the key to fix.
VisionConfig parse_vision_config(const nlohmann::json& root, const std::string& label);

}  // namespace sanctum

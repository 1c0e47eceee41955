#pragma once
// The one decoder-only model: embed → per layer [norm → mixer → +, norm → ffn → +] → norm → lm_head.
// Architectures differ only in options and in each layer's LayerConfig (mixer: attention or
// GatedDeltaNet; ffn: dense or MoE), so a hybrid is a per-layer config, not a class hierarchy.
#include <memory>
#include <string>

#include "model/blocks/gated_delta_net.h"
#include "model/blocks/moe.h"
#include "model/model.h"
#include "weights/checkpoint.h"

namespace sanctum {

class VisionTower;

struct DecoderOptions {
  std::string prefix = "model.";              // weight-name root of embed_tokens / layers / norm
  std::string lm_head = "lm_head";            // used when present; otherwise the embedding is tied
  bool qkv_bias = false;                      // qwen2
  bool gated_attention = false;               // qwen3_5: q_proj carries a sigmoid gate, per-head q/k norms
  float norm_offset = 0.0f;                   // 1 when RMSNorm weights are stored as (w - 1)
  GatedDeltaNetShape gdn;                     // for MixerKind::gated_delta_net layers
  MoeConfig moe;                              // for FfnKind::moe layers
  std::string moe_module = "mlp.";            // "block_sparse_moe." for Mixtral
  std::shared_ptr<const VisionTower> vision;  // VL checkpoints whose tower loaded: images in (forward_images)
};

std::unique_ptr<Model> make_decoder(ModelConfig config, Checkpoint& checkpoint, const DecoderOptions& options);

}  // namespace sanctum

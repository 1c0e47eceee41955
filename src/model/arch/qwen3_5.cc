// qwen3_5 / qwen3_5_moe (and their *_text forms): the hybrid GatedDeltaNet + gated-attention decoder.
// Checkpoint flavours: mlx-community (weights under language_model.model., RMSNorm stored as w,
// conv1d (C, K, 1)), Hugging Face VL (model.language_model., RMSNorm stored as w - 1, conv1d
// (C, 1, K), vision tower under model.visual.), Hugging Face text-only (model.).
#include "base/error.h"
#include "model/arch/llama_like.h"
#include "model/decoder.h"
#include "model/vision/vision_tower.h"

namespace sanctum {

std::unique_ptr<Model> make_qwen3_5(ModelConfig config, Checkpoint& ckpt) {
  const ModelConfig& c = config;
  DecoderOptions o;
  o.gated_attention = true;
  if (ckpt.has("language_model.model.embed_tokens.weight") || ckpt.has("language_model.model.embed_tokens.scales")) {
    o.prefix = "language_model.model.";
    o.lm_head = "language_model.lm_head";
  } else if (ckpt.has("model.language_model.embed_tokens.weight")) {
    o.prefix = "model.language_model.";
  }
  // The vision tower, when its weights are there (a VL config alone, as text-only conversions keep
  // it, loads the text model only).
  for (const char* tower : {"model.visual.", "vision_tower."}) {
    if (!ckpt.has(std::string(tower) + "patch_embed.proj.weight")) continue;
    const VisionConfig vc = parse_vision_config(c.raw, c.dir + "/config.json");
    check(vc.out_hidden_size == c.hidden_size, ErrorKind::invalid_input,
          c.dir + "/config.json: vision_config.out_hidden_size (" + std::to_string(vc.out_hidden_size) +
              ") must equal the text hidden_size (" + std::to_string(c.hidden_size) + ")");
    o.vision = std::make_shared<const VisionTower>(ckpt, tower, vc, c.quant);
    config.has_vision = true;
    // transformers' Qwen3.5 text rotary always interleaves its sections (mrope_interleaved or not).
    config.mrope_interleaved = true;
    break;
  }
  for (const char* ignored : {"model.visual.", "vision_tower.", "visual.", "mtp.", "model.mtp."}) ckpt.ignore_prefix(ignored);

  o.gdn.hidden = c.hidden_size;
  o.gdn.heads = {c.linear_num_key_heads, c.linear_key_head_dim, c.linear_num_value_heads, c.linear_value_head_dim};
  o.gdn.conv_kernel = c.linear_conv_kernel_dim > 0 ? c.linear_conv_kernel_dim : 4;
  bool any_gdn = false;
  for (const auto& l : c.layers) any_gdn |= l.mixer == MixerKind::gated_delta_net;
  if (any_gdn) {
    check(o.gdn.heads.n_key_heads > 0 && o.gdn.heads.key_dim > 0 && o.gdn.heads.n_value_heads > 0 && o.gdn.heads.value_dim > 0,
          ErrorKind::invalid_input,
          c.dir +
              "/config.json: linear_num_key_heads, linear_key_head_dim, linear_num_value_heads and "
              "linear_value_head_dim are required for linear_attention layers");
    check(o.gdn.heads.n_value_heads % o.gdn.heads.n_key_heads == 0, ErrorKind::invalid_input,
          c.dir + "/config.json: linear_num_value_heads must be a multiple of linear_num_key_heads");
    // Flavour: HF stores the conv kernel as (C, 1, K) and RMSNorm weights as (w - 1); mlx as (C, K, 1) and w.
    for (size_t i = 0; i < c.layers.size(); ++i) {
      if (c.layers[i].mixer != MixerKind::gated_delta_net) continue;
      Tensor conv = ckpt.tensor(o.prefix + "layers." + std::to_string(i) + ".linear_attn.conv1d.weight");
      o.norm_offset = (conv.ndim() == 3 && conv.dim(2) != 1) ? 1.0f : 0.0f;
      break;
    }
  } else {
    // No conv to tell the flavour by: mlx-community checkpoints put weights under language_model.
    o.norm_offset = o.prefix == "language_model.model." ? 0.0f : 1.0f;
  }

  if (c.num_experts > 0) {
    o.moe.hidden = c.hidden_size;
    o.moe.expert_intermediate = c.moe_intermediate_size;
    o.moe.n_experts = c.num_experts;
    o.moe.top_k = c.num_experts_per_tok;
    o.moe.normalize_top_k = c.norm_topk_prob;
    o.moe.shared_expert_intermediate = c.shared_expert_intermediate_size;
    o.moe.routing = MoeConfig::Routing::softmax_then_top_k;
    check(o.moe.expert_intermediate > 0 && o.moe.top_k > 0, ErrorKind::invalid_input,
          c.dir + "/config.json: moe_intermediate_size and num_experts_per_tok are required when num_experts > 0");
  }
  return make_decoder(std::move(config), ckpt, o);
}

}  // namespace sanctum

#pragma once
// The Qwen3-VL / Qwen3.5 vision tower over our ops: patch embedding (the Conv3d as a matmul over
// flattened patches), learned position embeddings resampled to each image's grid, blocks of
// [LayerNorm → attention with 2-D rotary positions, bidirectional within each image → +,
// LayerNorm → MLP → +], and the patch merger (each spatial_merge² block of patches → one token of
// the language model's hidden size). Numerics follow transformers' modeling_qwen3_5.py.
//
// Runs on the checkpoint's device (its weights are placed where the text model's are; the learned
// position table stays on the host, where each image's resampling of it is mixed); its output goes
// to the text model as host f32 rows.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/vision/image_input.h"
#include "model/vision/vision_config.h"
#include "ops/rope.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"
#include "weights/checkpoint.h"

namespace sanctum {

class VisionTower {
 public:
  // Loads the tower's weights under `prefix` ("model.visual." or "vision_tower."); dense
  // (f32/bf16/f16) or MLX-quantized linears, the patch embedding in either layout (torch
  // (out, C, T, P, P) or mlx (out, T, P, P, C)).
  VisionTower(Checkpoint& ckpt, const std::string& prefix, const VisionConfig& config, const QuantConfig& quant);

  const VisionConfig& config() const { return config_; }
  // Language-model tokens an image of this grid becomes: t * (h / merge) * (w / merge).
  int64_t tokens_for(const GridThw& grid) const;
  // pixel_values (sum of patches, patch_values) f32, the images' rows one after another in the
  // processor's layout, and their grids → (sum of tokens_for, out_hidden_size) f32 on the host.
  // Throws invalid_argument naming what does not fit.
  Tensor encode(const Tensor& pixel_values, std::span<const GridThw> grids) const;

 private:
  struct Linear {
    Weight w;
    Tensor bias;
  };
  struct Norm {
    Tensor weight, bias;
  };
  struct Block {
    Norm norm1, norm2;
    Linear qkv, proj, fc1, fc2;
  };
  Linear linear(Checkpoint& ckpt, const std::string& prefix, int64_t rows, int64_t cols, const QuantConfig& quant) const;
  Norm norm(Checkpoint& ckpt, const std::string& prefix, int64_t d) const;
  void apply(const Linear& l, const Tensor& x, Tensor& y) const;
  void add_position_embeddings(std::span<const GridThw> grids, Tensor& h) const;
  void attention(const Block& b, const Tensor& x, std::span<const GridThw> grids, std::span<const int32_t> rows,
                 std::span<const int32_t> cols, Tensor& out) const;

  VisionConfig config_;
  Device device_ = Device::cpu;  // where the weights and the activations live
  Weight patch_embed_;           // (hidden, patch_values) f32, columns in the processor's (C, T, P, P) order
  Tensor patch_bias_;
  Weight pos_embed_;  // (num_position_embeddings, hidden), dense or quantized, on the host
  std::vector<Block> blocks_;
  Norm merger_norm_;
  Linear merger_fc1_, merger_fc2_;
  ops::RopeTable rope_rows_, rope_cols_;  // the 2-D rotary: first half of the frequencies by row, second by column
};

}  // namespace sanctum

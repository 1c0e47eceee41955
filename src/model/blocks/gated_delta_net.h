#pragma once
// GatedDeltaNet linear attention (Qwen3.5): in_proj_qkv → causal depthwise conv1d (rolling state)
// → SiLU → L2-normalised q, k → gated delta rule (f32 recurrent state) → gated RMSNorm with z →
// out_proj. Key heads map to value heads by index inside the kernel (no copies).
#include <cstdint>
#include <string>

#include "model/blocks/workspace.h"
#include "model/state.h"
#include "ops/gated_delta.h"
#include "tensor/weight.h"
#include "weights/checkpoint.h"

namespace sanctum {

struct GatedDeltaNetShape {
  int64_t hidden = 0;
  ops::GatedDeltaShape heads;
  int64_t conv_kernel = 4;
  int64_t key_dim() const { return heads.n_key_heads * heads.key_dim; }
  int64_t value_dim() const { return heads.n_value_heads * heads.value_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
};

class GatedDeltaNetBlock {
 public:
  GatedDeltaNetBlock() = default;
  GatedDeltaNetBlock(Checkpoint& ckpt, const std::string& prefix, const GatedDeltaNetShape& shape, float norm_eps,
                     const QuantConfig& quant);

  // Zeroed conv and recurrent state for a new sequence.
  LinearAttentionState new_state() const;
  // x: (n, hidden) → out: (n, hidden); advances `state` by n tokens.
  void forward(const Tensor& x, LinearAttentionState& state, Workspace& ws, Tensor& out) const;
  size_t weight_bytes() const;

  // How the recurrence is evaluated (tests compare the forms).
  void set_algorithm(ops::GatedDeltaAlgorithm a) { algorithm_ = a; }

 private:
  GatedDeltaNetShape shape_;
  float eps_ = 1e-6f;
  Weight in_qkv_, in_z_, in_b_, in_a_, out_;
  Tensor conv_weight_;  // (conv_dim, kernel) view of either checkpoint layout
  Tensor conv_taps_;    // the same, rearranged once for the kernel
  Tensor a_log_, dt_bias_, norm_;
  ops::GatedDeltaAlgorithm algorithm_ = ops::GatedDeltaAlgorithm::automatic;
};

}  // namespace sanctum

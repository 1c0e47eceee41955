#pragma once
// GatedDeltaNet linear attention (Qwen3.5): in_proj_qkv → causal depthwise conv1d (rolling state)
// → SiLU → L2-normalised q, k → gated delta rule (f32 recurrent state) → gated RMSNorm with z →
// out_proj. Key heads map to value heads by index inside the kernel (no copies).
#include <cstdint>
#include <string>

#include "model/blocks/batch_rows.h"
#include "model/blocks/block_input.h"
#include "model/blocks/block_output.h"
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
  LinearAttentionState new_state(Device device) const;
  // x: (n, hidden), the batch's rows → out: (n, hidden); advances each sequence's state (layer
  // `layer` of it) over its rows. Whole 64-token chunks aligned to absolute positions run in the
  // chunked form, everything else token by token, so the bits depend only on positions — not on how
  // a prompt is split across forward calls (prompt-cache reuse and speculation rely on this) nor on
  // the other sequences of the batch.
  void forward(const BlockInput& x, const BatchRows& batch, size_t layer, Workspace& ws, const BlockOutput& out) const;
  // forward()'s out for n rows: bf16 where the output projection's GEMM writes it so (a GPU prompt in
  // the fast mode; add_rms_norm reads it), else f32.
  DType output_dtype(int64_t n) const;
  static constexpr int64_t kChunk = 64;
  size_t weight_bytes() const;

 private:
  GatedDeltaNetShape shape_;
  float eps_ = 1e-6f;
  std::string prefix_;  // module paths `prefix_`in_proj_qkv ..: what a per-request adapter targets
  Weight in_qkv_, in_z_, in_b_, in_a_, out_;
  Weight in_stacked_;   // qkv, z, b, a as one weight on a GPU (stacked_linear.h); else empty
  Tensor conv_weight_;  // (conv_dim, kernel) view of either checkpoint layout
  Tensor conv_taps_;    // the same, rearranged once for the kernel
  Tensor a_log_, dt_bias_, norm_;
};

}  // namespace sanctum

#pragma once
// Qwen3.5 / Qwen3-Next full attention: q_proj yields per head [query (d), gate (d)]; per-head
// RMSNorm on q and k; partial rotary (first rotary_dim dims); GQA over the KV cache; the output is
// multiplied by sigmoid(gate) before o_proj.
#include <cstdint>
#include <span>
#include <string>

#include "model/blocks/attention.h"
#include "model/blocks/batch_rows.h"
#include "model/blocks/block_input.h"
#include "model/blocks/block_output.h"
#include "model/blocks/workspace.h"
#include "model/state.h"
#include "ops/positions.h"
#include "ops/rope.h"
#include "tensor/weight.h"
#include "weights/checkpoint.h"

namespace sanctum {

class GatedAttentionBlock {
 public:
  GatedAttentionBlock() = default;
  // norm_offset: 1 for checkpoints that store RMSNorm weights as (w - 1) (Hugging Face Qwen3.5), else 0.
  GatedAttentionBlock(Checkpoint& ckpt, const std::string& prefix, const AttentionShape& shape, float norm_eps, float norm_offset,
                      const QuantConfig& quant);

  void forward(const BlockInput& x, const BatchRows& batch, size_t layer, const ops::RopeTable& rope, Workspace& ws,
               const BlockOutput& out) const;
  // forward()'s out for n rows: bf16 where the output projection's GEMM writes it so (a GPU prompt in
  // the fast mode; add_rms_norm reads it), else f32.
  DType output_dtype(int64_t n) const;
  size_t weight_bytes() const { return w_.nbytes() + q_norm_.nbytes() + k_norm_.nbytes(); }

 private:
  AttentionShape shape_;
  float eps_ = 1e-6f, norm_offset_ = 0.0f;
  AttentionProjections w_;  // q with its gate
  Tensor q_norm_, k_norm_;
};

}  // namespace sanctum

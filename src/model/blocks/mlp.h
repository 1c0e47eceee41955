#pragma once
// SiLU-gated MLP: down(silu(gate(x)) * up(x)).
#include <array>
#include <string>

#include "model/blocks/batch_rows.h"
#include "model/blocks/block_input.h"
#include "model/blocks/block_output.h"
#include "model/blocks/workspace.h"
#include "tensor/weight.h"
#include "weights/checkpoint.h"

namespace sanctum {

class MlpBlock {
 public:
  MlpBlock() = default;
  // Loads `prefix`.{gate,up,down}_proj (names overridable for Mixtral-style w1/w3/w2).
  MlpBlock(Checkpoint& ckpt, const std::string& prefix, int64_t hidden, int64_t intermediate, const QuantConfig& quant,
           const char* gate_name = "gate_proj", const char* up_name = "up_proj", const char* down_name = "down_proj");

  // x: (n, hidden) → out: (n, hidden); the batch's sequences choose their adapters (row_lora.h).
  void forward(const BlockInput& x, const BatchRows& batch, Workspace& ws, const BlockOutput& out) const;
  // Whether forward() over n rows takes x in bf16 as it stands (its projections round x to bf16).
  bool takes_bf16_input(int64_t n) const;
  // forward()'s out for n rows: bf16 where the output projection's GEMM writes it so (a GPU prompt in
  // the fast mode; add_rms_norm reads it), else f32.
  DType output_dtype(int64_t n) const;
  size_t weight_bytes() const { return gate_up_.nbytes() + gate_.nbytes() + up_.nbytes() + down_.nbytes(); }
  // gate, up and down as weights (where gate and up are stacked, views of the stack's rows), for a
  // caller that runs this MLP through other kernels: a MoE block's shared expert.
  std::array<Weight, 3> parts() const;

 private:
  int64_t intermediate_ = 0;
  std::string gate_name_, up_name_, down_name_;  // module paths, what a per-request adapter targets
  Weight gate_, up_, down_;
  void forward_with_lora(const BlockInput& x, const BatchRows& batch, Workspace& ws, const BlockOutput& out) const;
  Weight gate_up_;  // gate and up as one weight on a GPU (stacked_linear.h); else empty
};

}  // namespace sanctum

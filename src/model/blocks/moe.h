#pragma once
// Routed mixture of SiLU-gated experts, computing only the selected experts.
//   qwen3_5_moe: softmax over all experts → top-k (optionally renormalised) + a shared expert scaled
//                by sigmoid(shared_expert_gate(x)).
//   mixtral:     top-k of the router logits → softmax over those k.
// Expert weights load from any of: mlx `switch_mlp.{gate,up,down}_proj` 3-D grids (dense or
// quantized), Hugging Face fused `experts.gate_up_proj` / `experts.down_proj` grids, or per-expert
// tensors `experts.N.{gate,up,down}_proj` (`experts.N.{w1,w3,w2}` for Mixtral).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/blocks/block_input.h"
#include "model/blocks/block_output.h"
#include "model/blocks/mlp.h"
#include "model/blocks/workspace.h"
#include "ops/moe.h"
#include "tensor/weight.h"
#include "weights/checkpoint.h"

namespace sanctum {

struct MoeConfig {
  int64_t hidden = 0, expert_intermediate = 0, n_experts = 0, top_k = 0;
  enum class Routing { softmax_then_top_k, top_k_then_softmax } routing = Routing::softmax_then_top_k;
  bool normalize_top_k = true;             // softmax_then_top_k: rescale the k probabilities to sum to 1
  int64_t shared_expert_intermediate = 0;  // 0: no shared expert
};

class MoeBlock {
 public:
  MoeBlock() = default;
  MoeBlock(Checkpoint& ckpt, const std::string& prefix, const MoeConfig& config, const QuantConfig& quant);

  // x: (n, hidden) → out: (n, hidden); the batch's sequences choose their adapters for the shared
  // expert (row_lora.h; routed experts take adapters merged only).
  void forward(const BlockInput& input, const BatchRows& batch, Workspace& ws, const BlockOutput& out) const;
  // Bytes one token reads: router, top_k experts, shared expert.
  size_t weight_bytes_per_token() const;

 private:
  struct Expert {
    Weight gate, up, down;
  };
  void load_experts(Checkpoint& ckpt, const std::string& prefix, const QuantConfig& quant);
  // Every expert's gate, up and down projection, in expert order.
  std::array<std::vector<Weight>, 3> projections() const;
  // On a GPU, adds the shared expert to copies of the expert sets when its weights fit them.
  void join_shared_expert();
  ops::MoeRouting routing() const;
  // On a GPU: routing and the experts stay on the device (expert ids and their row groups are read
  // there), so neither a decode step nor a prompt waits for the host. Few tokens: a mat-vec per
  // (token, expert); more: rows grouped by expert, one tensor-core launch per projection.
  void forward_on_device(const Tensor& x, const Tensor& logits, const Tensor& shared_logit, Workspace& ws, const BlockOutput& out) const;

  MoeConfig config_;
  Weight router_;
  std::vector<Expert> experts_;
  ops::ExpertSet gate_set_, up_set_, down_set_;  // the same weights, indexable by expert id on the device
  // On a GPU, where the shared expert has the routed experts' shape and format: the sets above plus the
  // shared expert as id n_experts, so that decode runs it as one more rank in the same launches.
  ops::ExpertSet gate_shared_set_, up_shared_set_, down_shared_set_;
  bool shared_in_sets_ = false;
  bool has_shared_ = false;
  MlpBlock shared_;
  Weight shared_gate_;
  Weight router_and_gate_;  // on a GPU: router_ and shared_gate_ stacked (then both empty), else rows 0
};

}  // namespace sanctum

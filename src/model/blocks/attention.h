#pragma once
// Standard (Llama-style) multi-head attention with grouped KV heads, optional q/k/v biases, RoPE,
// and the KV cache written in place.
#include <cstdint>
#include <span>

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

struct AttentionShape {
  int64_t hidden = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
};

// An attention block's `prefix`.{q,k,v,o}_proj, q of q_rows rows (the queries, or the queries with
// their gates), each prepared for its device, and q, k and v stacked where they can be (qkv, or empty
// with the three kept apart).
struct AttentionProjections {
  AttentionProjections() = default;
  AttentionProjections(Checkpoint& ckpt, const std::string& prefix, const AttentionShape& shape, int64_t q_rows, const QuantConfig& quant);
  size_t nbytes() const { return qkv.nbytes() + q.nbytes() + k.nbytes() + v.nbytes() + o.nbytes(); }

  Weight q, k, v, o;
  Weight qkv;
  std::string prefix;  // module paths `prefix`q_proj ..: what a per-request adapter targets
};

class AttentionBlock {
 public:
  AttentionBlock() = default;
  // Loads `prefix`.{q,k,v,o}_proj (and q/k/v biases when `qkv_bias`).
  AttentionBlock(Checkpoint& ckpt, const std::string& prefix, const AttentionShape& shape, bool qkv_bias, const QuantConfig& quant);

  // x: (n, hidden) normalised input of the batch's rows; writes (n, hidden) into out. Each
  // sequence's rows attend over its own cache (layer `layer` of its state), which must already hold
  // capacity for its new rows.
  void forward(const BlockInput& x, const BatchRows& batch, size_t layer, const ops::RopeTable& rope, Workspace& ws,
               const BlockOutput& out) const;

  size_t weight_bytes() const;
  // Whether forward() over n rows takes x in bf16 as it stands (its projections round x to bf16).
  bool takes_bf16_input(int64_t n) const;
  // forward()'s out for n rows: bf16 where the output projection's GEMM writes it so (a GPU prompt in
  // the fast mode; add_rms_norm reads it), else f32.
  DType output_dtype(int64_t n) const;

 private:
  AttentionShape shape_;
  AttentionProjections w_;
  Tensor q_bias_, k_bias_, v_bias_;
};

}  // namespace sanctum

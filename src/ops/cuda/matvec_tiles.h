#pragma once
// 4-bit weights reordered at load for the tensor-core decode mat-vec (matvec_tiles.cu; the layout:
// matvec_tiles.cuh). Plain C++ declarations, so that the op front ends can call them in every build.
#include <cstdint>

#include "ops/moe.h"
#include "ops/normed_matmul.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops::cuda {

// A GPU weight in the row layout that the tiled mat-vec takes: 4-bit, groups of 64 or 128, bf16/f16
// scales, rows a multiple of 16, columns of 64, contiguous and 16-byte aligned.
bool can_tile(const Weight& w);
// Reorders w's tensors in place into WeightLayout::tiles (waits for the GPU).
void tile_weight(Weight& w);
// Load-time preparation of a GPU weight: tiles it in the bf16 precision mode when it can
// (tuning tile_weights=0 keeps the row layout, for comparisons).
void prepare_weight(Weight& w);
// The most x rows one tiled mat-vec takes (a decode batch): each weight tile is read once for all.
// Longer batches take the prefill GEMM.
constexpr int64_t kTiledRows = 16;
// A tiled weight and 1 to kTiledRows x rows, 16-byte aligned.
bool tiles_matvec_ok(const Weight& w, const Tensor& x, int64_t n);
// y (n, rows) = x (n, cols) · wᵀ with x rounded to bf16, sums in f32.
void tiles_matvec(const Tensor& x, const Weight& w, Tensor& y);
// A tiled weight stacked as gate (rows 0 .. m/2) then up, each half whole row tiles, and x as for
// tiles_matvec: act (n, m / 2) = silu(x · gateᵀ) * (x · upᵀ) in one launch, the bits of
// tiles_matvec into (n, m) followed by silu_mul (tuning fuse_swiglu=0: never offered).
bool tiles_silu_mul_ok(const Weight& gate_up, const Tensor& x);
void tiles_matvec_silu_mul(const Tensor& x, const Weight& gate_up, Tensor& act);
// matmul_residual, matmul_scaled and matmul_silu_mul_scaled over tiled weights (normed_matmul.h;
// the kernels: matvec_tiles.cuh, NormFusion). The model offers it unless its tuning has fuse_norm=0.
bool tiles_residual_ok(const Tensor& x, const Weight& w, const ResidualNorm& r);
int64_t tiles_matvec_residual(const Tensor& x, const Weight& w, const ResidualNorm& r);
bool tiles_scaled_ok(const ScaledInput& in, const Weight& w);
void tiles_matvec_scaled(const ScaledInput& in, const Weight& w, Tensor& y);
bool tiles_silu_mul_scaled_ok(const ScaledInput& in, const Weight& gate_up);
void tiles_matvec_silu_mul_scaled(const ScaledInput& in, const Weight& gate_up, Tensor& act);
// Experts in the tiled layout, picked by device ids, as expert_matmul: ya row i = a[ids[i]] · (x row
// i / fan); with b (same shape as a), yb likewise in the same launch. ya.dim(0) <= 65535.
bool tiles_experts_ok(const ExpertSet& experts, const Tensor& x);
void tiles_expert_matvec(const Tensor& x, const ExpertSet& a, const ExpertSet* b, const Tensor& ids, Tensor& ya, Tensor* yb);
// An MLP's gate and up experts, both tiled and of one shape and format, as tiles_expert_matvec
// into gate and up followed by silu_mul, in one launch and with those bits: act row i =
// silu(gate[ids[i]] · x) * (up[ids[i]] · x) (tuning fuse_swiglu=0: never offered).
bool tiles_expert_silu_mul_ok(const ExpertSet& gate, const ExpertSet& up, const Tensor& x);
void tiles_expert_silu_mul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& ids, Tensor& act);
// tiles_expert_silu_mul that routes in the same launch: each block picks its token's expert from
// logits (n, E) with moe_route's code (E <= 256); ids (n, ranks) and weights (n, k) receive what
// moe_route(logits, routing, ids, weights, appended_id) would write, and act the same bits as
// moe_route then tiles_expert_silu_mul (tuning route_in_experts=0: never offered).
bool tiles_routed_expert_silu_mul_ok(const ExpertSet& gate, const ExpertSet& up, const Tensor& x, const Tensor& logits);
void tiles_routed_expert_silu_mul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& logits,
                                  const MoeRouting& routing, int32_t appended_id, Tensor& ids, Tensor& weights, Tensor& act);
// tiles_expert_silu_mul and tiles_expert_matvec (one projection) over the tasks ops::moe_expert_tasks made
// of their ids: each task's expert read once for its slots, each slot with the ungrouped launch's bits.
void tiles_grouped_expert_silu_mul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& tasks, Tensor& act);
void tiles_grouped_expert_matvec(const Tensor& x, const ExpertSet& experts, const Tensor& tasks, Tensor& y);
// The down experts of one token's k + 1 ranks (the shared expert's last) followed by the MoE
// combine into the residual stream, in one launch (ops::expert_down_combine_residual;
// tuning fuse_moe_combine=0: never offered). Returns the count of squares.
bool tiles_expert_combine_residual_ok(const ExpertSet& down, const Tensor& act, const Tensor& per_rank, const ResidualNorm& r);
int64_t tiles_expert_matvec_combine_residual(const Tensor& act, const ExpertSet& down, const Tensor& ids, const Tensor& weights,
                                             const Tensor& shared_logit, Tensor& per_rank, const ResidualNorm& r);

}  // namespace sanctum::ops::cuda

#pragma once
// Row movement and mixing for mixture-of-experts layers, so the MoE block runs unchanged on any
// device: routing, grouping of tokens by expert, per-expert matmuls over the grouped rows, and the
// weighted combine.
#include <cstdint>
#include <span>
#include <vector>

#include "ops/normed_matmul.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops {

// dst row dst_rows[i] = src row src_rows[i], for every i. src, dst: (rows, d) f32 with equal d; rows
// may be strided. Indices are checked against both tensors; dst rows must be distinct.
void copy_rows(const Tensor& src, std::span<const int32_t> src_rows, Tensor& dst, std::span<const int32_t> dst_rows);

// The shared expert's weight per token: sigmoid of its gate logit; shared_logit (n, 1) f32 on the host.
std::vector<float> shared_gate_weights(const Tensor& shared_logit);

// out[t] = sum over r < k of weights[t*k + r] * per_rank[t*k + r], then + shared_weights[t] * shared[t]
// when shared is given — in that order, so a token's result does not depend on the batch.
//   per_rank: (n*k, d) f32; weights: n*k; shared: (n, d) f32 or null; shared_weights: n (or empty);
//   out: (n, d) f32.
void moe_combine(const Tensor& per_rank, std::span<const float> weights, const Tensor* shared, std::span<const float> shared_weights,
                 Tensor& out);

// How a token's router logits pick its experts.
struct MoeRouting {
  int64_t top_k = 0;
  bool softmax_first = true;  // softmax over all experts, then top-k (qwen3_5_moe); else top-k, then softmax over k (mixtral)
  bool normalize = true;      // softmax_first: rescale the k probabilities to sum to 1
};

// One token: the top_k experts by logit (ties → lower id) with their weights, ordered by logit.
// Softmax in double. The host side of the routing and the reference of moe_route.
void route_token(const float* logits, int64_t n_experts, const MoeRouting& routing, int32_t* ids, float* weights);

// The (token, rank) choices of n tokens, ids (n * top_k, token-major) as route_token gives them,
// gathered per expert in token order: the x rows an expert runs and, for each, its row
// t * top_k + r in a per-(token, rank) result. The host side of grouping prompts by expert.
struct ExpertRows {
  std::vector<int32_t> tokens, slots;
};
std::vector<ExpertRows> rows_by_expert(std::span<const int32_t> ids, int64_t n_experts, int64_t top_k);

// Every token on the logits' device: logits (n, E) f32 → ids (n, k) i32, weights (n, k) f32. With
// appended_id >= 0, ids is (n, k + 1) and each token's column k holds appended_id: a shared expert
// run as one more rank of the routed experts' launches.
void moe_route(const Tensor& logits, const MoeRouting& routing, Tensor& ids, Tensor& weights, int32_t appended_id = -1);

// One projection of every expert of a layer, addressable by expert id from device code (all experts
// share one shape and format). Built once at load.
class ExpertSet {
 public:
  ExpertSet() = default;
  explicit ExpertSet(std::vector<Weight> experts);
  // Whether w can join a set holding a: same shape, format, strides, device and layout.
  static bool fits(const Weight& a, const Weight& w);
  int64_t size() const { return static_cast<int64_t>(experts_.size()); }
  const Weight& operator[](int64_t e) const { return experts_[static_cast<size_t>(e)]; }
  // (E, 3) i64 on the GPU: addresses of each expert's data, scales and biases (empty on the CPU).
  const Tensor& device_table() const { return table_; }

 private:
  std::vector<Weight> experts_;
  Tensor table_;
};

// y row i = experts[ids[i]] · (x row i / fan), fan = rows of y per row of x (1, or k to feed each
// token to its k experts). x: (m / fan, cols) f32; ids: (m) i32 on x's device; y: (m, rows) f32.
void expert_matmul(const Tensor& x, const ExpertSet& experts, const Tensor& ids, Tensor& y);

// expert_matmul of two projections of one shape and format (an expert MLP's gate and up) over the
// same x and ids, in one launch where the backend can (a GPU in the bf16 mode, tiled experts).
void expert_gate_up_matmul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& ids, Tensor& gate_out,
                           Tensor& up_out);

// expert_gate_up_matmul followed by silu_mul: act row i = silu(gate[ids[i]] · x) * (up[ids[i]] · x),
// in one launch and with the bits of the two. Offered only where a kernel takes it (a GPU in the
// bf16 mode, tiled gate and up experts of one shape and format, act of at most 65,535 rows); a call
// elsewhere is an error.
bool expert_gate_up_silu_mul_ok(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& act);
void expert_gate_up_silu_mul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& ids, Tensor& act);

// moe_route and expert_gate_up_silu_mul in one launch (GPU decode, no routing launch between the
// router and the experts): each token's experts are picked from its router logits (n, E) as
// moe_route picks them; ids (n, ranks) and weights (n, k) receive what moe_route(logits, routing, ids,
// weights, appended_id) writes (ranks = k, or k + 1 with appended_id >= 0), and act the bits of
// expert_gate_up_silu_mul over those ids. Offered where expert_gate_up_silu_mul is and E <= 256
// (tuning route_in_experts=0: never); a call elsewhere is an error.
bool expert_gate_up_silu_mul_routed_ok(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& logits,
                                       const Tensor& act);
void expert_gate_up_silu_mul_routed(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& logits,
                                    const MoeRouting& routing, int32_t appended_id, Tensor& ids, Tensor& weights, Tensor& act);

// Decode batches whose tokens share experts: the (token, rank) slots grouped by the expert they chose
// into tasks of up to kExpertTaskSlots slots, so that a grouped launch reads each expert's weights
// once per task rather than once per slot. ids: (m) i32, each in [0, n_experts); tasks: (1 + m *
// kExpertTaskWords) i32 on ids' device, written as: tasks[0] the count of tasks, then task j at 1 + j *
// kExpertTaskWords: its expert, its count of slots c (1 .. kExpertTaskSlots), then those c slots
// ascending (the words past them undefined). Tasks go in expert order, an expert's slots in ascending
// order kExpertTaskSlots at a time; at most m tasks. Deterministic; a GPU never waits for the host.
constexpr int64_t kExpertTaskSlots = 8;  // the columns of one tensor-core mma
constexpr int64_t kExpertTaskWords = 2 + kExpertTaskSlots;
void moe_expert_tasks(const Tensor& ids, int64_t n_experts, Tensor& tasks);

// expert_gate_up_silu_mul and expert_matmul over the tasks that moe_expert_tasks made of their ids, each
// task one expert's weights read once for all its slots, with the bits of the ungrouped calls (a row
// depends only on its own x row and expert). Offered where the ungrouped call's kernel takes the
// experts (a GPU in the bf16 mode, tiled experts) and the experts and rows fit moe_expert_tasks's
// device limits (grouped_experts_ok); a call elsewhere is an error.
bool grouped_experts_ok(const Tensor& x, const ExpertSet& experts, const Tensor& y);
void grouped_expert_gate_up_silu_mul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& tasks, Tensor& act);
void grouped_expert_matvec(const Tensor& x, const ExpertSet& experts, const Tensor& tasks, Tensor& y);

// Counting sort of expert choices, stable: the rows that chose expert e are
// sorted[offsets[e] .. offsets[e + 1]), ascending. ids: (m) i32, each in [0, n_experts);
// offsets: (n_experts + 1) i32; sorted: (m) i32; all on one device (a GPU never waits for the host).
void moe_group(const Tensor& ids, int64_t n_experts, Tensor& offsets, Tensor& sorted);

// How grouped_expert_matmul maps the grouped rows j (sorted order) to rows of x and y.
enum class GroupedRows {
  gather,   // y row j = experts[e] · x row (sorted[j] / fan); fan = m / rows of x (k: token of a choice)
  scatter,  // y row sorted[j] = experts[e] · x row j
};

// Every expert over its own rows, e such that offsets[e] <= j < offsets[e + 1]; offsets and sorted as
// moe_group makes them, on x's device (m = sorted.numel()). x, y: f32 rows.
// Precision: the CPU sums f32 products as ops::matmul does. The GPU follows ops::matmul_precision():
// in the f32 mode f32 products and sums (slow; the MoE block keeps its host-grouped path there), in
// the bf16 mode x and the dequantized weights are rounded to bf16 and multiplied on the tensor cores
// with f32 sums, as the cuBLAS prefill path does. Either way a row's result depends only on its own
// x row and expert, never on the other rows of the call.
void grouped_expert_matmul(const Tensor& x, const ExpertSet& experts, const Tensor& offsets, const Tensor& sorted, GroupedRows mode,
                           Tensor& y);

// moe_combine with the weights in a tensor on the rows' device, and the shared expert's weight given
// as its gate logit (weight = sigmoid(logit)): weights (n, k) f32, shared_logit (n, 1) f32.
void moe_combine(const Tensor& per_rank, const Tensor& weights, const Tensor* shared, const Tensor* shared_logit, Tensor& out);

// The same with the shared expert's row inside per_rank, after each token's k routed rows:
// per_rank (n * (k + 1), d), as moe_route's appended id lays them out. Same arithmetic, in the same
// order, as moe_combine given that row as `shared`.
void moe_combine_shared_rank(const Tensor& per_rank, const Tensor& weights, const Tensor& shared_logit, Tensor& out);
// moe_combine_shared_rank for one token added straight into the residual stream with the next norm
// prepared (normed_matmul.h, ResidualNorm: r.h += the combined row, u and the squares), where
// moe_combine_residual_ok (a GPU, one token; offered by the model unless its tuning has fuse_norm=0). Returns the count of squares.
bool moe_combine_residual_ok(const Tensor& per_rank, const ResidualNorm& r);
int64_t moe_combine_shared_rank_residual(const Tensor& per_rank, const Tensor& weights, const Tensor& shared_logit, const ResidualNorm& r);

// expert_matmul of one token's k + 1 ranks (act (k + 1, I), ids as moe_route lays them out with the
// shared expert appended) followed by moe_combine_shared_rank_residual of those rows, in one launch
// where expert_down_combine_residual_ok (a GPU in the bf16 mode, tiled experts, one token;
// tuning fuse_moe_combine=0: never; fuse_norm=0: never offered by the model): per_rank (k + 1, d) receives
// expert_matmul's bits and r.h and r.u those of the combine. Returns the count of squares.
bool expert_down_combine_residual_ok(const Tensor& act, const ExpertSet& down, const Tensor& per_rank, const ResidualNorm& r);
int64_t expert_down_combine_residual(const Tensor& act, const ExpertSet& down, const Tensor& ids, const Tensor& weights,
                                     const Tensor& shared_logit, Tensor& per_rank, const ResidualNorm& r);

}  // namespace sanctum::ops

#include "model/blocks/moe.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "base/tuning.h"
#include "model/blocks/row_lora.h"
#include "model/blocks/stacked_linear.h"
#include "ops/ops.h"
#include "ops/precision.h"

namespace sanctum {

namespace {
enum Slot : size_t {
  kRouter = 500,
  kRows,
  kGate,
  kUp,
  kExpertOut,
  kPerRank,
  kShared,
  kSharedGate,
  kIds,
  kWeights,
  kOffsets,
  kSorted,
  kRouterAndGate,
  kTasks
};
// Up to this many tokens a GPU forward runs the experts as mat-vecs (decode of up to 64 streams,
// speculative verification); longer prompts group the pairs by expert for the prefill GEMM's tiles.
// Those tiles hold one or two rows of an expert in a decode batch: on an H100 the MoE shape decoded
// 16 / 32 / 64 streams at 852-878 / 1,039 / 1,397 tok/s with them past 8 or 16 tokens and
// 1,254-1,278 / 1,380 / 1,574 as mat-vec pairs (bench/gpu/batched_decode.py; bench/RESULTS.md).
constexpr int64_t kDeviceRoutedTokens = 64;
// From this many tokens (and up to kDeviceRoutedTokens) a GPU decode step groups the (token, rank)
// pairs by expert (ops::moe_expert_tasks), so an expert chosen by several tokens, and the shared expert
// that every token runs, is read once for up to 8 of them rather than once per pair: at 16 tokens of
// the 35B-A3B shape (256 experts, top 8, shared expert as a rank) about 103 expert reads a layer
// against 144, at 64 tokens 230 against 576. Below it the routing launch and the grouping launch it
// adds cost about what the fewer reads save (tuning group_decode_experts=0: never).
constexpr int64_t kGroupedDecodeTokens = 16;

// Expert e of a (E, rows, cols') grid as a 2-D weight; rows [row0, row0 + rows) of that expert.
Weight expert_view(const Tensor& data, const Tensor& scales, const Tensor& biases, int64_t e, int64_t row0, int64_t rows, int64_t cols,
                   QuantParams quant, const std::string& name) {
  Weight w;
  w.data = data.slice(0, e, e + 1).squeeze0().slice(0, row0, row0 + rows);
  if (scales) {
    w.scales = scales.slice(0, e, e + 1).squeeze0().slice(0, row0, row0 + rows);
    w.biases = biases.slice(0, e, e + 1).squeeze0().slice(0, row0, row0 + rows);
    w.quant = quant;
  }
  w.rows = rows;
  w.cols = cols;
  w.name = name + "[" + std::to_string(e) + "]";
  validate_weight(w);
  return w;
}

struct Grid {
  Tensor data, scales, biases;
  QuantParams quant;
  WeightLayout layout = WeightLayout::rows;
};

// On a GPU, prepares the whole grid as one (E · rows, cols) weight: in the bf16 mode that reorders it
// for the tiled mat-vec (ops::prepare_weight). Its 16-row tiles never straddle two experts, or an
// expert's gate and up halves, when every view's rows are a multiple of 16 (view_rows), so each
// expert's view keeps its offsets and only takes the layout tag.
void prepare_grid(Grid& g, int64_t view_rows, int64_t cols, const std::string& name) {
  if (g.data.device() != Device::cuda || !g.scales || view_rows % 16 != 0) return;
  const int64_t rows = g.data.dim(0) * g.data.dim(1);
  Weight whole;
  whole.data = g.data.reshape({rows, g.data.dim(2)});
  whole.scales = g.scales.reshape({rows, g.scales.dim(2)});
  whole.biases = g.biases.reshape({rows, g.biases.dim(2)});
  whole.quant = g.quant;
  whole.rows = rows;
  whole.cols = cols;
  whole.name = name;
  ops::prepare_weight(whole);
  g.layout = whole.layout;
}

Weight expert_view(const Grid& g, int64_t e, int64_t row0, int64_t rows, int64_t cols, const std::string& name) {
  Weight w = expert_view(g.data, g.scales, g.biases, e, row0, rows, cols, g.quant, name);
  w.layout = g.layout;
  return w;
}

Grid load_grid(Checkpoint& ckpt, const std::string& prefix, int64_t n_experts, int64_t rows, int64_t cols, const QuantConfig& quant) {
  Grid g;
  const bool quantized = ckpt.has(prefix + ".scales");
  const std::string weight_name = ckpt.has(prefix + ".weight") ? prefix + ".weight" : prefix;
  g.data = ckpt.tensor(weight_name);
  if (quantized) {
    g.scales = ckpt.tensor(prefix + ".scales");
    g.biases = ckpt.tensor(prefix + ".biases");
    g.quant = quant.for_layer(prefix);
    check(g.quant.bits != 0, ErrorKind::invalid_input, "tensor " + prefix + ": has scales but the config declares no quantization");
  }
  const int64_t packed_cols = quantized ? cols * g.quant.bits / 32 : cols;
  check(g.data.ndim() == 3 && g.data.dim(0) == n_experts && g.data.dim(1) == rows && g.data.dim(2) == packed_cols, ErrorKind::invalid_input,
        "tensor " + weight_name + ": expected (" + std::to_string(n_experts) + ", " + std::to_string(rows) + ", " +
            std::to_string(packed_cols) + "), got " + g.data.shape_string());
  return g;
}
}  // namespace

MoeBlock::MoeBlock(Checkpoint& ckpt, const std::string& prefix, const MoeConfig& c, const QuantConfig& quant) : config_(c) {
  check(c.n_experts > 0 && c.top_k > 0 && c.top_k <= c.n_experts, ErrorKind::invalid_input,
        "MoE config: need 0 < num_experts_per_tok <= num_experts");
  router_ = ckpt.linear(prefix + "gate", c.n_experts, c.hidden, quant);
  load_experts(ckpt, prefix, quant);
  auto [gates, ups, downs] = projections();
  gate_set_ = ops::ExpertSet(std::move(gates));
  up_set_ = ops::ExpertSet(std::move(ups));
  down_set_ = ops::ExpertSet(std::move(downs));
  if (c.shared_expert_intermediate > 0) {
    has_shared_ = true;
    shared_ = MlpBlock(ckpt, prefix + "shared_expert.", c.hidden, c.shared_expert_intermediate, quant);
    shared_gate_ = ckpt.linear(prefix + "shared_expert_gate", 1, c.hidden, quant);
    join_shared_expert();
    // The router and the shared expert's gate read the same x: on a GPU one launch for both, its
    // E + 1 rows padded to the tiled mat-vec's 16.
    router_and_gate_ = stack_linears(ckpt, {&router_, &shared_gate_}, prefix + "{gate,shared_expert_gate}", 16);
  }
  if (router_and_gate_.rows == 0) ops::prepare_weight(router_);
}

std::array<std::vector<Weight>, 3> MoeBlock::projections() const {
  std::array<std::vector<Weight>, 3> p;
  for (const Expert& e : experts_) {
    p[0].push_back(e.gate);
    p[1].push_back(e.up);
    p[2].push_back(e.down);
  }
  return p;
}

void MoeBlock::join_shared_expert() {
  if (experts_.empty() || experts_[0].gate.data.device() != Device::cuda) return;
  const auto [gate, up, down] = shared_.parts();
  const Expert& e = experts_[0];
  if (!ops::ExpertSet::fits(e.gate, gate) || !ops::ExpertSet::fits(e.up, up) || !ops::ExpertSet::fits(e.down, down)) return;
  auto [gates, ups, downs] = projections();
  gates.push_back(gate);
  ups.push_back(up);
  downs.push_back(down);
  gate_shared_set_ = ops::ExpertSet(std::move(gates));
  up_shared_set_ = ops::ExpertSet(std::move(ups));
  down_shared_set_ = ops::ExpertSet(std::move(downs));
  shared_in_sets_ = true;
}

void MoeBlock::load_experts(Checkpoint& ckpt, const std::string& prefix, const QuantConfig& quant) {
  const int64_t E = config_.n_experts, I = config_.expert_intermediate, H = config_.hidden;
  experts_.resize(static_cast<size_t>(E));
  if (ckpt.has(prefix + "switch_mlp.gate_proj.weight")) {  // mlx 3-D grids
    Grid gate = load_grid(ckpt, prefix + "switch_mlp.gate_proj", E, I, H, quant);
    Grid up = load_grid(ckpt, prefix + "switch_mlp.up_proj", E, I, H, quant);
    Grid down = load_grid(ckpt, prefix + "switch_mlp.down_proj", E, H, I, quant);
    prepare_grid(gate, I, H, prefix + "switch_mlp.gate_proj");
    prepare_grid(up, I, H, prefix + "switch_mlp.up_proj");
    prepare_grid(down, H, I, prefix + "switch_mlp.down_proj");
    for (int64_t e = 0; e < E; ++e) {
      auto& x = experts_[static_cast<size_t>(e)];
      x.gate = expert_view(gate, e, 0, I, H, prefix + "switch_mlp.gate_proj");
      x.up = expert_view(up, e, 0, I, H, prefix + "switch_mlp.up_proj");
      x.down = expert_view(down, e, 0, H, I, prefix + "switch_mlp.down_proj");
    }
  } else if (ckpt.has(prefix + "experts.gate_up_proj")) {  // Hugging Face fused grids: gate rows, then up rows
    Grid gate_up = load_grid(ckpt, prefix + "experts.gate_up_proj", E, 2 * I, H, quant);
    Grid down = load_grid(ckpt, prefix + "experts.down_proj", E, H, I, quant);
    prepare_grid(gate_up, I, H, prefix + "experts.gate_up_proj");
    prepare_grid(down, H, I, prefix + "experts.down_proj");
    for (int64_t e = 0; e < E; ++e) {
      auto& x = experts_[static_cast<size_t>(e)];
      x.gate = expert_view(gate_up, e, 0, I, H, prefix + "experts.gate_up_proj");
      x.up = expert_view(gate_up, e, I, I, H, prefix + "experts.gate_up_proj");
      x.down = expert_view(down, e, 0, H, I, prefix + "experts.down_proj");
    }
  } else {  // per-expert tensors
    const bool mixtral_names = ckpt.has(prefix + "experts.0.w1.weight");
    for (int64_t e = 0; e < E; ++e) {
      const std::string p = prefix + "experts." + std::to_string(e) + ".";
      auto& x = experts_[static_cast<size_t>(e)];
      x.gate = ckpt.linear(p + (mixtral_names ? "w1" : "gate_proj"), I, H, quant);
      x.up = ckpt.linear(p + (mixtral_names ? "w3" : "up_proj"), I, H, quant);
      x.down = ckpt.linear(p + (mixtral_names ? "w2" : "down_proj"), H, I, quant);
      // GPU only: on the CPU the experts keep the checkpoint layout (the int8 repack is for dense weights).
      if (x.gate.data.device() == Device::cuda)
        for (Weight* w : {&x.gate, &x.up, &x.down}) ops::prepare_weight(*w);
    }
  }
}

ops::MoeRouting MoeBlock::routing() const {
  return {config_.top_k, config_.routing == MoeConfig::Routing::softmax_then_top_k, config_.normalize_top_k};
}

void MoeBlock::forward(const BlockInput& input, const BatchRows& batch, Workspace& ws, const BlockOutput& out) const {
  const Tensor& x = input.tensor();  // the router, the experts and the shared expert all read it
  const int64_t n = x.dim(0), H = config_.hidden, I = config_.expert_intermediate, k = config_.top_k;
  Tensor logits, shared_logit;
  if (router_and_gate_.rows > 0) {  // views of one output: [router logits | shared gate logit | padding]
    Tensor both = ws.get(kRouterAndGate, n, router_and_gate_.rows);
    ops::matmul(x, router_and_gate_, both);
    logits = both.slice(1, 0, config_.n_experts);
    shared_logit = both.slice(1, config_.n_experts, config_.n_experts + 1);
  } else {
    logits = ws.get(kRouter, n, config_.n_experts);
    ops::matmul(x, router_, logits);
    if (has_shared_) {
      shared_logit = ws.get(kSharedGate, n, 1);
      ops::matmul(x, shared_gate_, shared_logit);
    }
  }
  // The exact f32 mode keeps longer GPU inputs on the host-grouped path below, whose matmuls give each
  // row the f32 mat-vec's bits; the bf16 mode groups them on the device (tensor cores, no host wait).
  if (logits.device() == Device::cuda && (n <= kDeviceRoutedTokens || ops::matmul_precision() != ops::MatmulPrecision::f32)) {
    check(!batch_has_lora(batch), ErrorKind::unsupported, "per-request adapters run on the CPU only: serve --lora with --device cpu");
    return forward_on_device(x, logits, shared_logit, ws, out);
  }
  // Routing is decided on the host; on a GPU this is the layer's one wait for the device.
  if (logits.device() != Device::cpu) {
    Tensor host = ws.host(kRouter, n, config_.n_experts);
    host.copy_from(logits);
    logits = host;
    if (has_shared_) {
      Tensor g = ws.host(kSharedGate, n, 1);
      g.copy_from(shared_logit);
      shared_logit = g;
    }
  }

  // Route every token, then group tokens by expert so each expert runs once over its rows.
  std::vector<float> weights(static_cast<size_t>(n * k));
  std::vector<int32_t> ids(static_cast<size_t>(n * k));
  const ops::MoeRouting how = routing();
  for (int64_t t = 0; t < n; ++t)
    ops::route_token(logits.data<float>() + t * logits.stride(0), config_.n_experts, how, ids.data() + t * k, weights.data() + t * k);
  // Per (token, rank) expert outputs, summed in rank order afterwards: the result for a token does
  // not depend on which other tokens share the batch.
  Tensor per_rank = ws.get(kPerRank, n * k, H);
  const std::vector<ops::ExpertRows> by_expert = ops::rows_by_expert(ids, config_.n_experts, k);
  std::vector<int32_t> local;  // 0, 1, ..: an expert's rows in its own scratch
  for (int64_t e = 0; e < config_.n_experts; ++e) {
    const ops::ExpertRows& rows = by_expert[static_cast<size_t>(e)];
    if (rows.tokens.empty()) continue;
    const auto m = static_cast<int64_t>(rows.tokens.size());
    local.resize(static_cast<size_t>(m));
    std::iota(local.begin(), local.end(), 0);
    Tensor xe = ws.get(kRows, m, H);
    ops::copy_rows(x, rows.tokens, xe, local);
    const Expert& ex = experts_[static_cast<size_t>(e)];
    Tensor gate = ws.get(kGate, m, I), up = ws.get(kUp, m, I), ye = ws.get(kExpertOut, m, H);
    ops::matmul(xe, ex.gate, gate);
    ops::matmul(xe, ex.up, up);
    ops::silu_mul(gate, up, gate);
    ops::matmul(gate, ex.down, ye);
    ops::copy_rows(ye, local, per_rank, rows.slots);
  }
  if (!has_shared_) {
    ops::moe_combine(per_rank, weights, nullptr, {}, out.delta());
    return;
  }
  Tensor shared = ws.get(kShared, n, H);
  shared_.forward(x, batch, ws, shared);
  ops::moe_combine(per_rank, weights, &shared, ops::shared_gate_weights(shared_logit), out.delta());
}

void MoeBlock::forward_on_device(const Tensor& x, const Tensor& logits, const Tensor& shared_logit, Workspace& ws,
                                 const BlockOutput& out) const {
  const int64_t n = x.dim(0), H = config_.hidden, I = config_.expert_intermediate, k = config_.top_k, E = config_.n_experts;
  // Few tokens, where the shared expert fits the expert sets: it runs as rank k of every token, in the
  // routed experts' launches (three launches fewer per layer than its own MLP).
  const bool shared_rank = shared_in_sets_ && n <= kDeviceRoutedTokens;
  const int64_t ranks = shared_rank ? k + 1 : k;
  Tensor ids = ws.get_typed(kIds, n, ranks, DType::i32), weights = ws.get(kWeights, n, k);
  Tensor flat_ids = ids.reshape({n * ranks});
  // per_rank row t * ranks + r: token t through its r-th expert.
  Tensor gate = ws.get(kGate, n * ranks, I), up = ws.get(kUp, n * ranks, I), per_rank = ws.get(kPerRank, n * ranks, H);
  const int32_t appended = shared_rank ? static_cast<int32_t>(E) : -1;
  const ops::ExpertSet& gates = shared_rank ? gate_shared_set_ : gate_set_;
  const ops::ExpertSet& ups = shared_rank ? up_shared_set_ : up_set_;
  const ops::ExpertSet& downs = shared_rank ? down_shared_set_ : down_set_;
  const bool grouped = n >= kGroupedDecodeTokens && n <= kDeviceRoutedTokens && current_tuning().on(Knob::group_decode_experts) &&
                       ops::expert_gate_up_silu_mul_ok(x, gates, ups, gate) && ops::grouped_experts_ok(x, gates, gate) &&
                       ops::grouped_experts_ok(gate, downs, per_rank);
  if (grouped) {
    ops::moe_route(logits, routing(), ids, weights, appended);
    Tensor tasks =
        ws.get_typed(kTasks, 1, 1 + n * ranks * ops::kExpertTaskWords, DType::i32).reshape({1 + n * ranks * ops::kExpertTaskWords});
    ops::moe_expert_tasks(flat_ids, gates.size(), tasks);
    ops::grouped_expert_gate_up_silu_mul(x, gates, ups, tasks, gate);
    ops::grouped_expert_matvec(gate, downs, tasks, per_rank);
  } else if (n <= kDeviceRoutedTokens) {
    if (ops::expert_gate_up_silu_mul_routed_ok(x, gates, ups, logits, gate)) {
      // The gate/up launch routes its tokens: no launch stands between the router and the experts.
      ops::expert_gate_up_silu_mul_routed(x, gates, ups, logits, routing(), appended, flat_ids, weights, gate);
    } else if (ops::expert_gate_up_silu_mul_ok(x, gates, ups, gate)) {
      ops::moe_route(logits, routing(), ids, weights, appended);
      ops::expert_gate_up_silu_mul(x, gates, ups, flat_ids, gate);
    } else {
      ops::moe_route(logits, routing(), ids, weights, appended);
      ops::expert_gate_up_matmul(x, gates, ups, flat_ids, gate, up);
      ops::silu_mul(gate, up, gate);
    }
    // One token whose output goes straight into the residual stream: the combine ends the down launch.
    const ops::ResidualNorm* residual = out.offered();
    if (shared_rank && n == 1 && residual != nullptr && ops::expert_down_combine_residual_ok(gate, downs, per_rank, *residual))
      return out.took(ops::expert_down_combine_residual(gate, downs, flat_ids, weights, shared_logit, per_rank, *residual));
    ops::expert_matmul(gate, downs, flat_ids, per_rank);
  } else {
    ops::moe_route(logits, routing(), ids, weights, appended);
    // Rows of gate and up in expert order (sorted), one grouped launch per projection; the down
    // projection writes each result back to its (token, rank) row.
    Tensor offsets = ws.get_typed(kOffsets, 1, E + 1, DType::i32).reshape({E + 1});
    Tensor sorted = ws.get_typed(kSorted, 1, n * k, DType::i32).reshape({n * k});
    ops::moe_group(flat_ids, E, offsets, sorted);
    ops::grouped_expert_matmul(x, gate_set_, offsets, sorted, ops::GroupedRows::gather, gate);
    ops::grouped_expert_matmul(x, up_set_, offsets, sorted, ops::GroupedRows::gather, up);
    ops::silu_mul(gate, up, gate);
    ops::grouped_expert_matmul(gate, down_set_, offsets, sorted, ops::GroupedRows::scatter, per_rank);
  }
  if (shared_rank) {  // one token: straight into the residual stream where the decoder offers it
    const ops::ResidualNorm* residual = out.offered();
    if (residual != nullptr && n == 1 && ops::moe_combine_residual_ok(per_rank, *residual))
      return out.took(ops::moe_combine_shared_rank_residual(per_rank, weights, shared_logit, *residual));
    return ops::moe_combine_shared_rank(per_rank, weights, shared_logit, out.delta());
  }
  if (!has_shared_) return ops::moe_combine(per_rank, weights, nullptr, nullptr, out.delta());
  Tensor shared = ws.get(kShared, n, H);
  shared_.forward(x, BatchRows{}, ws, shared);  // no adapters on a GPU (--lora refuses --device cuda)
  ops::moe_combine(per_rank, weights, &shared, &shared_logit, out.delta());
}

size_t MoeBlock::weight_bytes_per_token() const {
  size_t b = router_.nbytes() + router_and_gate_.nbytes();
  if (!experts_.empty()) {
    const Expert& e = experts_[0];
    b += static_cast<size_t>(config_.top_k) * (e.gate.nbytes() + e.up.nbytes() + e.down.nbytes());
  }
  if (has_shared_) b += shared_.weight_bytes() + shared_gate_.nbytes();
  return b;
}

}  // namespace sanctum

#include "ops/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "ops/cuda/kernels.h"
#include "ops/cuda/matvec_tiles.h"
#include "ops/cuda/moe_grouped.h"
#include "ops/matmul.h"
#include "ops/op_util.h"
#include "ops/precision.h"
#include "ops/ref/moe.h"

namespace sanctum::ops {

namespace {
void require_rows(const char* op, const char* name, const Tensor& t) {
  detail::require_defined(op, name, t);
  detail::require_dtype(op, name, t, DType::f32);
  SANCTUM_REQUIRE(t.ndim() == 2, op, std::string(name) + " must be 2-D, got " + t.shape_string());
  detail::require_inner_contiguous(op, name, t);
}
}  // namespace

void copy_rows(const Tensor& src, std::span<const int32_t> src_rows, Tensor& dst, std::span<const int32_t> dst_rows) {
  constexpr const char* kOp = "copy_rows";
  require_rows(kOp, "src", src);
  require_rows(kOp, "dst", dst);
  const Device device = detail::require_one_device(kOp, {{"src", &src}, {"dst", &dst}});
  SANCTUM_REQUIRE(src.dim(1) == dst.dim(1), kOp, "src " + src.shape_string() + " and dst " + dst.shape_string() + " differ in width");
  SANCTUM_REQUIRE(src_rows.size() == dst_rows.size(), kOp, "src_rows and dst_rows differ in length");
  for (size_t i = 0; i < src_rows.size(); ++i)
    SANCTUM_REQUIRE(src_rows[i] >= 0 && src_rows[i] < src.dim(0) && dst_rows[i] >= 0 && dst_rows[i] < dst.dim(0), kOp,
                    "row index out of range at " + std::to_string(i));
  if (src_rows.empty() || src.dim(1) == 0) return;
  if (device == Device::cuda) return cuda::copy_rows(src, src_rows, dst, dst_rows);
  const size_t bytes = static_cast<size_t>(src.dim(1)) * sizeof(float);
  for (size_t i = 0; i < src_rows.size(); ++i)
    std::memcpy(dst.data<float>() + dst_rows[i] * dst.stride(0), src.data<float>() + src_rows[i] * src.stride(0), bytes);
}

namespace {

// out row t = sum over r < k of weights[t k + r] * per_rank row (t ranks + r), then, with shared
// rows (row t at shared + t * shared_stride), + shared_weights[t] * that row; in this order.
void combine_on_host(const Tensor& per_rank, int64_t ranks, std::span<const float> weights, int64_t k, const float* shared,
                     int64_t shared_stride, std::span<const float> shared_weights, Tensor& out) {
  const int64_t n = out.dim(0), d = out.dim(1);
  for (int64_t t = 0; t < n; ++t) {
    float* o = out.data<float>() + t * out.stride(0);
    std::fill(o, o + d, 0.0f);
    for (int64_t r = 0; r < k; ++r) {
      const float w = weights[static_cast<size_t>(t * k + r)];
      const float* y = per_rank.data<float>() + (t * ranks + r) * per_rank.stride(0);
      for (int64_t j = 0; j < d; ++j) o[j] += w * y[j];
    }
    if (shared != nullptr) {
      const float g = shared_weights[static_cast<size_t>(t)];
      const float* s = shared + t * shared_stride;
      for (int64_t j = 0; j < d; ++j) o[j] += g * s[j];
    }
  }
}

}  // namespace

std::vector<float> shared_gate_weights(const Tensor& shared_logit) {
  std::vector<float> g;
  for (int64_t t = 0; t < shared_logit.dim(0); ++t)
    g.push_back(1.0f / (1.0f + std::exp(-shared_logit.data<float>()[t * shared_logit.stride(0)])));
  return g;
}

void moe_combine(const Tensor& per_rank, std::span<const float> weights, const Tensor* shared, std::span<const float> shared_weights,
                 Tensor& out) {
  constexpr const char* kOp = "moe_combine";
  require_rows(kOp, "per_rank", per_rank);
  require_rows(kOp, "out", out);
  if (shared) require_rows(kOp, "shared", *shared);
  const Tensor none;
  const Device device = detail::require_one_device(kOp, {{"per_rank", &per_rank}, {"out", &out}, {"shared", shared ? shared : &none}});
  const int64_t n = out.dim(0), d = out.dim(1);
  SANCTUM_REQUIRE(n > 0 ? per_rank.dim(0) % n == 0 : per_rank.dim(0) == 0, kOp, "per_rank rows must be n * k");
  const int64_t k = n > 0 ? per_rank.dim(0) / n : 0;
  SANCTUM_REQUIRE(per_rank.dim(1) == d && static_cast<int64_t>(weights.size()) == n * k, kOp,
                  "per_rank " + per_rank.shape_string() + " and " + std::to_string(weights.size()) + " weights do not fit out " +
                      out.shape_string());
  if (shared)
    SANCTUM_REQUIRE(shared->dim(0) == n && shared->dim(1) == d && static_cast<int64_t>(shared_weights.size()) == n, kOp,
                    "shared " + shared->shape_string() + " with " + std::to_string(shared_weights.size()) + " weights does not fit out " +
                        out.shape_string());
  if (n == 0 || d == 0) return;
  if (device == Device::cuda) return cuda::moe_combine(per_rank, weights, shared, shared_weights, out);
  combine_on_host(per_rank, k, weights, k, shared ? shared->data<float>() : nullptr, shared ? shared->stride(0) : 0, shared_weights, out);
}

void route_token(const float* logits, int64_t n_experts, const MoeRouting& routing, int32_t* ids, float* weights) {
  const int64_t E = n_experts, k = routing.top_k;
  std::vector<std::pair<float, int32_t>> order(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = {logits[e], static_cast<int32_t>(e)};
  auto better = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
  const float max_logit = order[0].first;
  for (int64_t i = 0; i < k; ++i) ids[i] = order[static_cast<size_t>(i)].second;
  if (routing.softmax_first) {
    double total = 0.0;
    for (int64_t e = 0; e < E; ++e) total += std::exp(static_cast<double>(logits[e] - max_logit));
    double kept = 0.0;
    for (int64_t i = 0; i < k; ++i) {
      weights[i] = static_cast<float>(std::exp(static_cast<double>(order[static_cast<size_t>(i)].first - max_logit)) / total);
      kept += weights[i];
    }
    if (routing.normalize)
      for (int64_t i = 0; i < k; ++i) weights[i] = static_cast<float>(weights[i] / kept);
  } else {
    double total = 0.0;
    for (int64_t i = 0; i < k; ++i) total += std::exp(static_cast<double>(order[static_cast<size_t>(i)].first - max_logit));
    for (int64_t i = 0; i < k; ++i)
      weights[i] = static_cast<float>(std::exp(static_cast<double>(order[static_cast<size_t>(i)].first - max_logit)) / total);
  }
}

std::vector<ExpertRows> rows_by_expert(std::span<const int32_t> ids, int64_t n_experts, int64_t top_k) {
  std::vector<ExpertRows> by_expert(static_cast<size_t>(n_experts));
  for (size_t slot = 0; slot < ids.size(); ++slot) {
    const int32_t e = ids[slot];
    SANCTUM_REQUIRE(e >= 0 && e < n_experts, "rows_by_expert", "expert id " + std::to_string(e) + " out of range");
    by_expert[static_cast<size_t>(e)].tokens.push_back(static_cast<int32_t>(static_cast<int64_t>(slot) / top_k));
    by_expert[static_cast<size_t>(e)].slots.push_back(static_cast<int32_t>(slot));
  }
  return by_expert;
}

namespace {
// The routings the device code takes: 1 to 32 experts a token, no more than there are.
void require_top_k(const char* op, int64_t k, int64_t experts) {
  SANCTUM_REQUIRE(k >= 1 && k <= experts && k <= 32, op, "top_k must be in [1, min(experts, 32)], got " + std::to_string(k));
}
}  // namespace

void moe_route(const Tensor& logits, const MoeRouting& routing, Tensor& ids, Tensor& weights, int32_t appended_id) {
  constexpr const char* kOp = "moe_route";
  require_rows(kOp, "logits", logits);
  detail::require_dtype(kOp, "ids", ids, DType::i32);
  detail::require_dtype(kOp, "weights", weights, DType::f32);
  const Device device = detail::require_one_device(kOp, {{"logits", &logits}, {"ids", &ids}, {"weights", &weights}});
  const int64_t n = logits.dim(0), E = logits.dim(1), k = routing.top_k;
  require_top_k(kOp, k, E);
  const int64_t ranks = appended_id >= 0 ? k + 1 : k;  // ids per token
  SANCTUM_REQUIRE(ids.is_contiguous() && weights.is_contiguous() && ids.numel() == n * ranks && weights.numel() == n * k, kOp,
                  "ids must be contiguous with " + std::to_string(n * ranks) +
                      " elements and weights with n * top_k = " + std::to_string(n * k));
  if (n == 0) return;
  if (device == Device::cuda) return cuda::moe_route(logits, routing, ids, weights, appended_id);
  for (int64_t t = 0; t < n; ++t) {
    int32_t* row = ids.data<int32_t>() + t * ranks;
    route_token(logits.data<float>() + t * logits.stride(0), E, routing, row, weights.data<float>() + t * k);
    if (appended_id >= 0) row[k] = appended_id;
  }
}

bool ExpertSet::fits(const Weight& a, const Weight& w) {
  return w.rows == a.rows && w.cols == a.cols && w.quant.bits == a.quant.bits && w.quant.group_size == a.quant.group_size &&
         w.data.dtype() == a.data.dtype() && w.data.stride(0) == a.data.stride(0) && w.data.device() == a.data.device() &&
         w.layout == a.layout && (!w.quantized() || (w.scales.dtype() == a.scales.dtype() && w.scales.stride(0) == a.scales.stride(0)));
}

ExpertSet::ExpertSet(std::vector<Weight> experts) : experts_(std::move(experts)) {
  constexpr const char* kOp = "ExpertSet";
  SANCTUM_REQUIRE(!experts_.empty(), kOp, "no experts");
  const Weight& a = experts_[0];
  for (const Weight& w : experts_) {
    detail::require_weight(kOp, w);
    SANCTUM_REQUIRE(fits(a, w), kOp, "expert '" + w.name + "' differs in shape, format or layout from '" + a.name + "'");
  }
  if (a.data.device() != Device::cuda) return;
  Tensor host = Tensor::zeros({size(), 3}, DType::i64);
  for (int64_t e = 0; e < size(); ++e) {
    const Weight& w = experts_[static_cast<size_t>(e)];
    int64_t* row = host.data<int64_t>() + e * 3;
    row[0] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(w.data.raw()));
    row[1] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(w.quantized() ? w.scales.raw() : nullptr));
    row[2] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(w.quantized() ? w.biases.raw() : nullptr));
  }
  table_ = host.to(Device::cuda);
}

namespace {
// The checks of expert_matmul; returns the device of the call. `ids` names the tensor that picks each
// row's expert (a grouped call's tasks), which holds `picks` values per row of y.
Device check_expert_matmul(const char* op, const Tensor& x, const ExpertSet& experts, const Tensor& ids, const Tensor& y,
                           const char* ids_name = "ids", int64_t picks = 1, int64_t extra = 0) {
  require_rows(op, "x", x);
  require_rows(op, "y", y);
  detail::require_dtype(op, ids_name, ids, DType::i32);
  SANCTUM_REQUIRE(experts.size() > 0, op, "empty expert set");
  const Tensor& w0 = experts[0].data;
  const Device device = detail::require_one_device(op, {{"x", &x}, {ids_name, &ids}, {"y", &y}, {"experts", &w0}});
  const int64_t m = y.dim(0);
  SANCTUM_REQUIRE(ids.is_contiguous() && ids.numel() == extra + m * picks, op,
                  std::string(ids_name) + " must hold " + std::to_string(extra + m * picks) + " values for " + std::to_string(m) +
                      " rows of y");
  SANCTUM_REQUIRE(x.dim(0) > 0 ? m % x.dim(0) == 0 : m == 0, op, "rows of y must be a multiple of rows of x");
  SANCTUM_REQUIRE(x.dim(1) == experts[0].cols && y.dim(1) == experts[0].rows, op,
                  "x " + x.shape_string() + " / y " + y.shape_string() + " do not fit experts of (" + std::to_string(experts[0].rows) +
                      ", " + std::to_string(experts[0].cols) + ")");
  return device;
}

// The tiled tensor-core kernel reads the experts (bf16 mode, decode-sized calls).
bool tiled_experts(Device device, const ExpertSet& experts, const Tensor& x, const Tensor& y) {
  return device == Device::cuda && matmul_precision() != MatmulPrecision::f32 && y.dim(0) <= 65535 && cuda::tiles_experts_ok(experts, x);
}
}  // namespace

void expert_matmul(const Tensor& x, const ExpertSet& experts, const Tensor& ids, Tensor& y) {
  constexpr const char* kOp = "expert_matmul";
  const Device device = check_expert_matmul(kOp, x, experts, ids, y);
  const int64_t m = y.dim(0);
  if (m == 0) return;
  if (device == Device::cuda) return cuda::expert_matmul(x, experts, ids, y);
  const int64_t fan = m / x.dim(0);
  for (int64_t i = 0; i < m; ++i) {
    const int32_t e = ids.data<int32_t>()[i];
    SANCTUM_REQUIRE(e >= 0 && e < experts.size(), kOp, "expert id " + std::to_string(e) + " out of range");
    Tensor yr = y.slice(0, i, i + 1);
    matmul(x.slice(0, i / fan, i / fan + 1), experts[e], yr);
  }
}

void expert_gate_up_matmul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& ids, Tensor& gate_out,
                           Tensor& up_out) {
  constexpr const char* kOp = "expert_gate_up_matmul";
  const Device device = check_expert_matmul(kOp, x, gate, ids, gate_out);
  check_expert_matmul(kOp, x, up, ids, up_out);
  if (gate_out.dim(0) == 0) return;
  // One launch takes both when they share a shape and format (tiled implies 4-bit, so scales exist).
  if (tiled_experts(device, gate, x, gate_out) && tiled_experts(device, up, x, up_out) && gate[0].rows == up[0].rows &&
      gate[0].quant.group_size == up[0].quant.group_size && gate[0].scales.dtype() == up[0].scales.dtype() &&
      gate_out.stride(0) == up_out.stride(0))
    return cuda::tiles_expert_matvec(x, gate, &up, ids, gate_out, &up_out);
  expert_matmul(x, gate, ids, gate_out);
  expert_matmul(x, up, ids, up_out);
}

bool expert_gate_up_silu_mul_ok(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& act) {
  if (!x || !act || x.ndim() != 2 || act.ndim() != 2 || x.dtype() != DType::f32 || gate.size() == 0) return false;
  return x.device() == Device::cuda && act.device() == Device::cuda && tiled_experts(Device::cuda, gate, x, act) &&
         cuda::tiles_expert_silu_mul_ok(gate, up, x);
}

void expert_gate_up_silu_mul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& ids, Tensor& act) {
  constexpr const char* kOp = "expert_gate_up_silu_mul";
  check_expert_matmul(kOp, x, gate, ids, act);
  SANCTUM_REQUIRE(expert_gate_up_silu_mul_ok(x, gate, up, act), kOp,
                  "no fused kernel takes these experts with x " + x.shape_string() + "; use expert_gate_up_matmul and silu_mul");
  if (act.dim(0) == 0) return;
  cuda::tiles_expert_silu_mul(x, gate, up, ids, act);
}

bool expert_gate_up_silu_mul_routed_ok(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& logits,
                                       const Tensor& act) {
  if (!logits || logits.ndim() != 2 || logits.dtype() != DType::f32 || logits.device() != Device::cuda || logits.stride(1) != 1)
    return false;
  return expert_gate_up_silu_mul_ok(x, gate, up, act) && cuda::tiles_routed_expert_silu_mul_ok(gate, up, x, logits);
}

void expert_gate_up_silu_mul_routed(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& logits,
                                    const MoeRouting& routing, int32_t appended_id, Tensor& ids, Tensor& weights, Tensor& act) {
  constexpr const char* kOp = "expert_gate_up_silu_mul_routed";
  check_expert_matmul(kOp, x, gate, ids, act);
  SANCTUM_REQUIRE(expert_gate_up_silu_mul_routed_ok(x, gate, up, logits, act), kOp,
                  "no fused kernel routes these experts with logits " + logits.shape_string() +
                      "; use moe_route and expert_gate_up_silu_mul");
  const int64_t n = x.dim(0), E = logits.dim(1), k = routing.top_k, ranks = appended_id >= 0 ? k + 1 : k;
  require_top_k(kOp, k, E);
  SANCTUM_REQUIRE(logits.dim(0) == n && act.dim(0) == n * ranks, kOp,
                  "logits " + logits.shape_string() + " and act " + act.shape_string() + " need one row per token and " +
                      std::to_string(ranks) + " per token");
  SANCTUM_REQUIRE(appended_id < gate.size() && E <= gate.size(), kOp, "the experts chosen must be in the sets");
  detail::require_dtype(kOp, "weights", weights, DType::f32);
  SANCTUM_REQUIRE(weights.device() == Device::cuda && weights.is_contiguous() && weights.numel() == n * k, kOp,
                  "weights must be contiguous on the GPU with n * top_k = " + std::to_string(n * k) + " elements");
  if (n == 0) return;
  cuda::tiles_routed_expert_silu_mul(x, gate, up, logits, routing, appended_id, ids, weights, act);
}

bool expert_down_combine_residual_ok(const Tensor& act, const ExpertSet& down, const Tensor& per_rank, const ResidualNorm& r) {
  if (!act || !per_rank || act.ndim() != 2 || per_rank.ndim() != 2 || act.dtype() != DType::f32 || per_rank.dtype() != DType::f32 ||
      down.size() == 0 || act.dim(0) != per_rank.dim(0) || act.device() != Device::cuda || per_rank.device() != Device::cuda)
    return false;
  return tiled_experts(Device::cuda, down, act, per_rank) && cuda::tiles_expert_combine_residual_ok(down, act, per_rank, r);
}

int64_t expert_down_combine_residual(const Tensor& act, const ExpertSet& down, const Tensor& ids, const Tensor& weights,
                                     const Tensor& shared_logit, Tensor& per_rank, const ResidualNorm& r) {
  constexpr const char* kOp = "expert_down_combine_residual";
  check_expert_matmul(kOp, act, down, ids, per_rank);
  SANCTUM_REQUIRE(expert_down_combine_residual_ok(act, down, per_rank, r), kOp,
                  "no fused kernel takes these experts with act " + act.shape_string() +
                      "; use expert_matmul and moe_combine_shared_rank_residual");
  const int64_t k = per_rank.dim(0) - 1;
  for (const auto& [name, t, count] :
       {std::tuple<const char*, const Tensor*, int64_t>{"weights", &weights, k}, {"shared_logit", &shared_logit, 1}}) {
    detail::require_dtype(kOp, name, *t, DType::f32);
    SANCTUM_REQUIRE(t->device() == Device::cuda && t->is_contiguous() && t->numel() == count, kOp,
                    std::string(name) + " must hold " + std::to_string(count) + " contiguous values on the GPU");
  }
  return cuda::tiles_expert_matvec_combine_residual(act, down, ids, weights, shared_logit, per_rank, r);
}

void moe_group(const Tensor& ids, int64_t n_experts, Tensor& offsets, Tensor& sorted) {
  constexpr const char* kOp = "moe_group";
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"ids", &ids}, {"offsets", &offsets}, {"sorted", &sorted}}) {
    detail::require_defined(kOp, name, *t);
    detail::require_dtype(kOp, name, *t, DType::i32);
    SANCTUM_REQUIRE(t->is_contiguous(), kOp, std::string(name) + " must be contiguous");
  }
  const Device device = detail::require_one_device(kOp, {{"ids", &ids}, {"offsets", &offsets}, {"sorted", &sorted}});
  const int64_t m = ids.numel();
  SANCTUM_REQUIRE(n_experts > 0 && offsets.numel() == n_experts + 1, kOp, "offsets must hold n_experts + 1 elements");
  SANCTUM_REQUIRE(sorted.numel() == m && m < (int64_t{1} << 31), kOp, "sorted must hold one element per id");
  if (device == Device::cuda) return cuda::moe_group(ids, n_experts, offsets, sorted);
  for (int64_t i = 0; i < m; ++i)
    SANCTUM_REQUIRE(ids.data<int32_t>()[i] >= 0 && ids.data<int32_t>()[i] < n_experts, kOp,
                    "expert id " + std::to_string(ids.data<int32_t>()[i]) + " out of range at " + std::to_string(i));
  ref::moe_group(ids.data<int32_t>(), m, n_experts, offsets.data<int32_t>(), sorted.data<int32_t>());
}

void moe_expert_tasks(const Tensor& ids, int64_t n_experts, Tensor& tasks) {
  constexpr const char* kOp = "moe_expert_tasks";
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"ids", &ids}, {"tasks", &tasks}}) {
    detail::require_defined(kOp, name, *t);
    detail::require_dtype(kOp, name, *t, DType::i32);
    SANCTUM_REQUIRE(t->is_contiguous(), kOp, std::string(name) + " must be contiguous");
  }
  const Device device = detail::require_one_device(kOp, {{"ids", &ids}, {"tasks", &tasks}});
  const int64_t m = ids.numel();
  SANCTUM_REQUIRE(n_experts > 0 && m < (int64_t{1} << 31) / kExpertTaskWords, kOp, "n_experts must be positive and ids fewer");
  SANCTUM_REQUIRE(tasks.numel() == 1 + m * kExpertTaskWords, kOp,
                  "tasks must hold 1 + " + std::to_string(kExpertTaskWords) + " elements per id (" +
                      std::to_string(1 + m * kExpertTaskWords) + ")");
  if (device == Device::cuda) return cuda::moe_expert_tasks(ids, n_experts, tasks);
  for (int64_t i = 0; i < m; ++i)
    SANCTUM_REQUIRE(ids.data<int32_t>()[i] >= 0 && ids.data<int32_t>()[i] < n_experts, kOp,
                    "expert id " + std::to_string(ids.data<int32_t>()[i]) + " out of range at " + std::to_string(i));
  ref::moe_expert_tasks(ids.data<int32_t>(), m, n_experts, tasks.data<int32_t>());
}

bool grouped_experts_ok(const Tensor& x, const ExpertSet& experts, const Tensor& y) {
  if (!x || !y || x.ndim() != 2 || y.ndim() != 2 || x.dtype() != DType::f32 || experts.size() == 0 || x.device() != Device::cuda ||
      y.device() != Device::cuda)
    return false;
  return tiled_experts(Device::cuda, experts, x, y) && cuda::expert_tasks_fit(y.dim(0), experts.size());
}

void grouped_expert_gate_up_silu_mul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& tasks, Tensor& act) {
  constexpr const char* kOp = "grouped_expert_gate_up_silu_mul";
  check_expert_matmul(kOp, x, gate, tasks, act, "tasks", kExpertTaskWords, 1);
  SANCTUM_REQUIRE(grouped_experts_ok(x, gate, act) && expert_gate_up_silu_mul_ok(x, gate, up, act), kOp,
                  "no grouped kernel takes these experts with x " + x.shape_string() + "; use expert_gate_up_silu_mul");
  if (act.dim(0) == 0) return;
  cuda::tiles_grouped_expert_silu_mul(x, gate, up, tasks, act);
}

void grouped_expert_matvec(const Tensor& x, const ExpertSet& experts, const Tensor& tasks, Tensor& y) {
  constexpr const char* kOp = "grouped_expert_matvec";
  check_expert_matmul(kOp, x, experts, tasks, y, "tasks", kExpertTaskWords, 1);
  SANCTUM_REQUIRE(grouped_experts_ok(x, experts, y), kOp,
                  "no grouped kernel takes these experts with x " + x.shape_string() + "; use expert_matmul");
  if (y.dim(0) == 0) return;
  cuda::tiles_grouped_expert_matvec(x, experts, tasks, y);
}

void grouped_expert_matmul(const Tensor& x, const ExpertSet& experts, const Tensor& offsets, const Tensor& sorted, GroupedRows mode,
                           Tensor& y) {
  constexpr const char* kOp = "grouped_expert_matmul";
  require_rows(kOp, "x", x);
  require_rows(kOp, "y", y);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"offsets", &offsets}, {"sorted", &sorted}}) {
    detail::require_defined(kOp, name, *t);
    detail::require_dtype(kOp, name, *t, DType::i32);
    SANCTUM_REQUIRE(t->is_contiguous(), kOp, std::string(name) + " must be contiguous");
  }
  SANCTUM_REQUIRE(experts.size() > 0, kOp, "empty expert set");
  const Tensor& w0 = experts[0].data;
  const Device device =
      detail::require_one_device(kOp, {{"x", &x}, {"offsets", &offsets}, {"sorted", &sorted}, {"y", &y}, {"experts", &w0}});
  const int64_t m = sorted.numel(), E = experts.size();
  SANCTUM_REQUIRE(offsets.numel() == E + 1, kOp, "offsets must hold one element per expert and one more");
  if (mode == GroupedRows::gather)
    SANCTUM_REQUIRE(y.dim(0) == m && (x.dim(0) > 0 ? m % x.dim(0) == 0 : m == 0), kOp,
                    "gather: y " + y.shape_string() + " needs one row per sorted row, a multiple of the rows of x " + x.shape_string());
  else
    SANCTUM_REQUIRE(x.dim(0) == m && y.dim(0) == m, kOp,
                    "scatter: x " + x.shape_string() + " and y " + y.shape_string() + " need one row per sorted row (" + std::to_string(m) +
                        ")");
  SANCTUM_REQUIRE(x.dim(1) == experts[0].cols && y.dim(1) == experts[0].rows, kOp,
                  "x " + x.shape_string() + " / y " + y.shape_string() + " do not fit experts of (" + std::to_string(experts[0].rows) +
                      ", " + std::to_string(experts[0].cols) + ")");
  if (m == 0) return;
  if (device == Device::cuda) return cuda::grouped_expert_matmul(x, experts, offsets, sorted, mode, y);
  const int32_t* off = offsets.data<int32_t>();
  const int32_t* rows = sorted.data<int32_t>();
  SANCTUM_REQUIRE(off[0] == 0 && off[E] <= m, kOp, "offsets must start at 0 and end within sorted");
  for (int64_t e = 0; e < E; ++e) SANCTUM_REQUIRE(off[e] <= off[e + 1], kOp, "offsets must not decrease");
  for (int64_t j = 0; j < off[E]; ++j) SANCTUM_REQUIRE(rows[j] >= 0 && rows[j] < m, kOp, "sorted row out of range at " + std::to_string(j));
  // Each expert's rows gathered into one block, one matmul (its weight read once), results scattered.
  const int64_t fan = mode == GroupedRows::gather ? m / x.dim(0) : 1;
  std::vector<int32_t> src, dst;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t count = off[e + 1] - off[e];
    if (count == 0) continue;
    src.clear();
    dst.clear();
    for (int64_t j = off[e]; j < off[e + 1]; ++j) {
      src.push_back(static_cast<int32_t>(mode == GroupedRows::gather ? rows[j] / fan : j));
      dst.push_back(static_cast<int32_t>(mode == GroupedRows::gather ? j : rows[j]));
    }
    Tensor xe = Tensor::zeros({count, x.dim(1)}, DType::f32), ye = Tensor::zeros({count, y.dim(1)}, DType::f32);
    std::vector<int32_t> local(static_cast<size_t>(count));
    for (int32_t i = 0; i < static_cast<int32_t>(count); ++i) local[static_cast<size_t>(i)] = i;
    copy_rows(x, src, xe, local);
    matmul(xe, experts[e], ye);
    copy_rows(ye, local, y, dst);
  }
}

void moe_combine(const Tensor& per_rank, const Tensor& weights, const Tensor* shared, const Tensor* shared_logit, Tensor& out) {
  constexpr const char* kOp = "moe_combine";
  detail::require_dtype(kOp, "weights", weights, DType::f32);
  SANCTUM_REQUIRE(weights.is_contiguous(), kOp, "weights must be contiguous");
  SANCTUM_REQUIRE((shared == nullptr) == (shared_logit == nullptr), kOp, "shared and shared_logit go together");
  const int64_t n = out.dim(0);
  if (shared_logit) {
    detail::require_dtype(kOp, "shared_logit", *shared_logit, DType::f32);
    SANCTUM_REQUIRE(shared_logit->ndim() == 2 && shared_logit->dim(0) == n && shared_logit->dim(1) == 1, kOp,
                    "shared_logit must be (n, 1), got " + shared_logit->shape_string());
  }
  if (weights.device() == Device::cuda) {
    require_rows(kOp, "per_rank", per_rank);
    require_rows(kOp, "out", out);
    detail::require_one_device(kOp, {{"per_rank", &per_rank},
                                     {"weights", &weights},
                                     {"out", &out},
                                     {"shared", shared ? shared : &weights},
                                     {"shared_logit", shared_logit ? shared_logit : &weights}});
    SANCTUM_REQUIRE(n > 0 && per_rank.dim(0) == weights.numel() && weights.numel() % n == 0 && per_rank.dim(1) == out.dim(1), kOp,
                    "per_rank " + per_rank.shape_string() + " and weights " + weights.shape_string() + " do not fit out " +
                        out.shape_string());
    if (shared) SANCTUM_REQUIRE(shared->dim(0) == n && shared->dim(1) == out.dim(1), kOp, "shared must be (n, d)");
    return cuda::moe_combine_device(per_rank, weights, shared, shared_logit, out);
  }
  const std::vector<float> shared_weights = shared_logit ? shared_gate_weights(*shared_logit) : std::vector<float>{};
  moe_combine(per_rank, std::span<const float>(weights.data<float>(), static_cast<size_t>(weights.numel())), shared, shared_weights, out);
}

void moe_combine_shared_rank(const Tensor& per_rank, const Tensor& weights, const Tensor& shared_logit, Tensor& out) {
  constexpr const char* kOp = "moe_combine_shared_rank";
  require_rows(kOp, "per_rank", per_rank);
  require_rows(kOp, "out", out);
  detail::require_dtype(kOp, "weights", weights, DType::f32);
  detail::require_dtype(kOp, "shared_logit", shared_logit, DType::f32);
  SANCTUM_REQUIRE(weights.is_contiguous(), kOp, "weights must be contiguous");
  const Device device =
      detail::require_one_device(kOp, {{"per_rank", &per_rank}, {"weights", &weights}, {"shared_logit", &shared_logit}, {"out", &out}});
  const int64_t n = out.dim(0), d = out.dim(1);
  SANCTUM_REQUIRE(n > 0 && weights.numel() % n == 0, kOp, "weights " + weights.shape_string() + " do not fit out " + out.shape_string());
  const int64_t k = weights.numel() / n;
  SANCTUM_REQUIRE(per_rank.dim(0) == n * (k + 1) && per_rank.dim(1) == d, kOp,
                  "per_rank must be (n * (k + 1), d) = (" + std::to_string(n * (k + 1)) + ", " + std::to_string(d) + "), got " +
                      per_rank.shape_string());
  SANCTUM_REQUIRE(shared_logit.ndim() == 2 && shared_logit.dim(0) == n && shared_logit.dim(1) == 1, kOp,
                  "shared_logit must be (n, 1), got " + shared_logit.shape_string());
  if (d == 0) return;
  if (device == Device::cuda) return cuda::moe_combine_shared_rank(per_rank, weights, shared_logit, out);
  const int64_t s = per_rank.stride(0);
  combine_on_host(per_rank, k + 1, std::span<const float>(weights.data<float>(), static_cast<size_t>(n * k)), k,
                  per_rank.data<float>() + k * s, (k + 1) * s, shared_gate_weights(shared_logit), out);
}

bool moe_combine_residual_ok(const Tensor& per_rank, const ResidualNorm& r) {
  return per_rank && per_rank.device() == Device::cuda && per_rank.dtype() == DType::f32 && per_rank.ndim() == 2 &&
         cuda::moe_combine_residual_ok(per_rank.dim(1), r);
}

int64_t moe_combine_shared_rank_residual(const Tensor& per_rank, const Tensor& weights, const Tensor& shared_logit, const ResidualNorm& r) {
  constexpr const char* kOp = "moe_combine_shared_rank_residual";
  SANCTUM_REQUIRE(moe_combine_residual_ok(per_rank, r), kOp,
                  "no fused kernel takes this stream; use moe_combine_shared_rank and add_rms_norm");
  require_rows(kOp, "per_rank", per_rank);
  detail::require_dtype(kOp, "weights", weights, DType::f32);
  detail::require_dtype(kOp, "shared_logit", shared_logit, DType::f32);
  SANCTUM_REQUIRE(weights.is_contiguous() && weights.device() == Device::cuda && shared_logit.device() == Device::cuda, kOp,
                  "weights and shared_logit must be contiguous on the GPU");
  const int64_t k = weights.numel();
  SANCTUM_REQUIRE(per_rank.dim(0) == k + 1, kOp, "per_rank must be (k + 1, d) for one token, got " + per_rank.shape_string());
  SANCTUM_REQUIRE(shared_logit.numel() == 1, kOp, "shared_logit must be (1, 1), got " + shared_logit.shape_string());
  return cuda::moe_combine_shared_rank_residual(per_rank, weights, shared_logit, r);
}

}  // namespace sanctum::ops

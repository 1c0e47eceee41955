#include "ops/attention.h"

#include <functional>

#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"
#include "ops/gated_output.h"
#include "ops/gating.h"
#include "ops/op_util.h"

namespace sanctum::ops {

namespace {
constexpr const char* kOp = "attention";

Device check_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, const Tensor& out) {
  detail::require_defined(kOp, "q", q);
  detail::require_defined(kOp, "k", k);
  detail::require_defined(kOp, "v", v);
  detail::require_defined(kOp, "out", out);
  const Device device = detail::require_one_device(kOp, {{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}});
  // out may be bf16 on the GPU, contiguous (attention_output_dtype).
  if (device != Device::cuda || out.dtype() != DType::bf16 || !out.is_contiguous()) detail::require_dtype(kOp, "out", out, DType::f32);
  for (const auto& [name, t] : {detail::Named{"q", &q}, detail::Named{"k", &k}, detail::Named{"v", &v}, detail::Named{"out", &out}}) {
    if (t != &out) detail::require_dtype(kOp, name, *t, DType::f32);
    SANCTUM_REQUIRE(t->ndim() == 3, kOp, std::string(name) + " must be 3-D (tokens, heads, head_dim), got " + t->shape_string());
    detail::require_inner_contiguous(kOp, name, *t);
  }
  SANCTUM_REQUIRE(detail::same_shape(q, out), kOp, "out " + out.shape_string() + " must match q " + q.shape_string());
  SANCTUM_REQUIRE(detail::same_shape(k, v), kOp, "k " + k.shape_string() + " and v " + v.shape_string() + " must have one shape");
  SANCTUM_REQUIRE(k.dim(2) == q.dim(2), kOp, "head_dim differs: q has " + std::to_string(q.dim(2)) + ", k has " + std::to_string(k.dim(2)));
  SANCTUM_REQUIRE(k.dim(1) > 0 && q.dim(1) % k.dim(1) == 0, kOp,
                  "n_heads " + std::to_string(q.dim(1)) + " is not a multiple of n_kv_heads " + std::to_string(k.dim(1)));
  SANCTUM_REQUIRE(q_pos0 >= 0 && k.dim(0) >= q_pos0 + q.dim(0), kOp,
                  "the cache holds " + std::to_string(k.dim(0)) + " rows, queries need " + std::to_string(q_pos0 + q.dim(0)) + " (q_pos0 " +
                      std::to_string(q_pos0) + " + " + std::to_string(q.dim(0)) + " queries)");
  return device;
}
}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, float scale, Tensor& out) {
  const Device device = check_attention(q, k, v, q_pos0, out);
  if (q.dim(0) == 0 || q.dim(1) == 0) return;
  if (device == Device::cuda) return cuda::attention(q, k, v, q_pos0, nullptr, scale, out);
  cpu::attention(q, k, v, q_pos0, scale, out);
}

namespace {
// attention over a whole cache; gate, where given and the GPU takes it, applied on the way out.
void cache_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Positions& positions, float scale, const Tensor* gate,
                     Tensor& out) {
  const Device device = check_attention(q, k, v, positions.first(), out);
  SANCTUM_REQUIRE(positions.size() == q.dim(0), kOp,
                  std::to_string(positions.size()) + " positions for " + std::to_string(q.dim(0)) + " queries");
  if (positions.device != nullptr) detail::require_device_positions(kOp, positions, device);
  if (q.dim(0) == 0 || q.dim(1) == 0) return;
  // The GPU kernels size their launches by k's rows, the whole cache here, with or without device
  // positions: a step gives the same bits recorded or not.
  const int32_t* device_first = positions.device != nullptr ? positions.device->data<int32_t>() : nullptr;
  if (device == Device::cuda) return cuda::attention(q, k, v, positions.first(), device_first, scale, out, gate);
  const int64_t first = device_first != nullptr ? device_first[0] : positions.first(), end = first + q.dim(0);
  cpu::attention(q, k.slice(0, 0, end), v.slice(0, 0, end), first, scale, out);
}
}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Positions& positions, float scale, Tensor& out) {
  cache_attention(q, k, v, positions, scale, nullptr, out);
}

namespace detail {
void gate_attention_output(const Tensor& q, const Tensor& gate, Tensor& out, const std::function<void(const Tensor* gate)>& attend) {
  detail::require_defined(kOp, "q", q);
  detail::require_defined(kOp, "gate", gate);
  detail::require_defined(kOp, "out", out);
  detail::require_dtype(kOp, "gate", gate, DType::f32);
  detail::require_dtype(kOp, "out", out, DType::f32);
  SANCTUM_REQUIRE(gate.ndim() == 3 && detail::same_shape(gate, out), kOp,
                  "gate " + gate.shape_string() + " must match out " + out.shape_string());
  detail::require_inner_contiguous(kOp, "gate", gate);
  SANCTUM_REQUIRE(gate.device() == out.device(), kOp, "gate and out must be on one device");
  const auto rows = [](const Tensor& t) { return t.reshape({t.dim(0) * t.dim(1), t.dim(2)}); };
  const Tensor gate_rows = rows(gate);  // refuses a gate whose heads are not rows of one stride, before anything runs
  if (out.device() == Device::cuda && cuda::attention_takes_gate(q.dim(0))) return attend(&gate);
  attend(nullptr);
  Tensor out_rows = rows(out);
  sigmoid_mul(out_rows, gate_rows, out_rows);
}
}  // namespace detail

void gated_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Positions& positions, float scale, const Tensor& gate,
                     Tensor& out) {
  detail::gate_attention_output(q, gate, out, [&](const Tensor* g) { cache_attention(q, k, v, positions, scale, g, out); });
}

DType attention_output_dtype(int64_t queries, int64_t head_dim, Device device) {
  return device == Device::cuda && cuda::attention_gives_bf16(queries, head_dim) ? DType::bf16 : DType::f32;
}

}  // namespace sanctum::ops

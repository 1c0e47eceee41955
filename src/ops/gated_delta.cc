#include "ops/gated_delta.h"

#include <string>

#include "ops/cpu/gated_delta.h"
#include "ops/cuda/kernels.h"
#include "ops/op_util.h"

namespace sanctum::ops {
namespace {

// Below this many tokens `automatic` runs the token-by-token kernel, from it on the chunked one.
// Decode (n = 1) and short appends take the sequential path (no per-call state transposes, no L x L
// products for a partial chunk); at 2048 tokens the chunked form measured ~2-2.3x faster per token
// (Qwen3.5 shapes, 2 threads). The two paths round differently (~1e-6 relative on realistic
// inputs; the tests hold them to 1e-4), far inside the 1e-3 the engine allows between "prefill k +
// decode" and "full prefill". In the fast matmul mode the chunked CPU kernel's bf16 products widen
// that to ~2^-9 (the tests hold them to 2e-2 of the largest value).
constexpr int64_t kChunkedFromTokens = 64;

std::string dims(const Tensor& t) { return t.shape_string(); }

// [first byte, last byte] of the memory a 1-D..4-D view can touch.
std::pair<const char*, const char*> extent(const Tensor& t) {
  const char* base = static_cast<const char*>(t.raw());
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < t.ndim(); ++i) {
    if (t.dim(i) == 0) return {base, base - 1};
    const int64_t span = (t.dim(i) - 1) * t.stride(i);
    (span < 0 ? lo : hi) += span;
  }
  const int64_t size = static_cast<int64_t>(dtype_size(t.dtype()));
  return {base + lo * size, base + hi * size + size - 1};
}

bool overlap(const Tensor& a, const Tensor& b) {
  if (!a || !b || a.numel() == 0 || b.numel() == 0) return false;
  const auto [a0, a1] = extent(a);
  const auto [b0, b1] = extent(b);
  return a0 <= b1 && b0 <= a1;
}

bool same_view(const Tensor& a, const Tensor& b) {
  if (a.raw() != b.raw() || !detail::same_shape(a, b)) return false;
  for (int i = 0; i < a.ndim(); ++i)
    if (a.dim(i) > 1 && a.stride(i) != b.stride(i)) return false;
  return true;
}

void require_f32_matrix(const char* op, const char* name, const Tensor& t) {
  detail::require_defined(op, name, t);
  detail::require_dtype(op, name, t, DType::f32);
  SANCTUM_REQUIRE(t.ndim() == 2, op, std::string(name) + " must be 2-D, got " + dims(t));
  detail::require_inner_contiguous(op, name, t);
}

void require_per_head(const char* op, const char* name, const Tensor& t, int64_t heads) {
  detail::require_defined(op, name, t);
  detail::require_float(op, name, t);
  SANCTUM_REQUIRE(t.ndim() == 1 && t.dim(0) == heads && (heads <= 1 || t.stride(0) == 1), op,
                  std::string(name) + " must be a contiguous (" + std::to_string(heads) + ") vector, got " + dims(t));
}

// The checks of the *_rows ops: one state per row, rows in range and distinct, states apart.
void check_rows(const char* kOp, int64_t n, std::span<const int64_t> rows, std::span<Tensor* const> states) {
  SANCTUM_REQUIRE(rows.size() == states.size(), kOp,
                  std::to_string(rows.size()) + " rows but " + std::to_string(states.size()) + " states: one state per row");
  for (size_t i = 0; i < rows.size(); ++i) {
    SANCTUM_REQUIRE(rows[i] >= 0 && rows[i] < n, kOp, "row " + std::to_string(rows[i]) + " is outside the " + std::to_string(n) + " rows");
    SANCTUM_REQUIRE(states[i] != nullptr, kOp, "state " + std::to_string(i) + " is null");
    for (size_t j = 0; j < i; ++j) {
      SANCTUM_REQUIRE(rows[j] != rows[i], kOp, "row " + std::to_string(rows[i]) + " is listed twice");
      SANCTUM_REQUIRE(!overlap(*states[i], *states[j]), kOp,
                      "states " + std::to_string(j) + " and " + std::to_string(i) + " overlap: each row needs a state of its own");
    }
  }
}

}  // namespace

namespace {

// Checks shared by both conv entry points; kernel and channels come from the weight's layout.
void check_conv(const char* kOp, const Tensor& x, const Tensor& state, const Tensor& w, const char* w_name, int64_t kernel,
                int64_t w_channels, const Tensor& out) {
  require_f32_matrix(kOp, "x", x);
  require_f32_matrix(kOp, "out", out);
  detail::require_defined(kOp, "state", state);
  detail::require_dtype(kOp, "state", state, DType::f32);
  detail::require_one_device(kOp, {{"x", &x}, {"state", &state}, {w_name, &w}, {"out", &out}});
  const int64_t n = x.dim(0), channels = x.dim(1);
  SANCTUM_REQUIRE(w_channels == channels, kOp,
                  std::string(w_name) + " " + dims(w) + " does not match the " + std::to_string(channels) + " channels of x");
  SANCTUM_REQUIRE(state.ndim() == 2 && state.dim(0) == kernel - 1 && state.dim(1) == channels, kOp,
                  "state must be (kernel - 1, channels) = (" + std::to_string(kernel - 1) + ", " + std::to_string(channels) + "), got " +
                      dims(state));
  if (kernel > 1) detail::require_inner_contiguous(kOp, "state", state);
  SANCTUM_REQUIRE(out.dim(0) == n && out.dim(1) == channels, kOp, "out " + dims(out) + " must match x " + dims(x));
  SANCTUM_REQUIRE(!overlap(out, x), kOp, "out must not alias x");
  SANCTUM_REQUIRE(!overlap(state, x) && !overlap(state, out), kOp, "state must not alias x or out");
}

}  // namespace

void causal_conv1d_silu(const Tensor& x, Tensor& state, const Tensor& weight, Tensor& out) {
  constexpr const char* kOp = "causal_conv1d_silu";
  detail::require_defined(kOp, "weight", weight);
  detail::require_float(kOp, "weight", weight);
  SANCTUM_REQUIRE(weight.ndim() == 2 && weight.dim(1) >= 1, kOp, "weight must be (channels, kernel), got " + dims(weight));
  detail::require_inner_contiguous(kOp, "weight", weight);
  check_conv(kOp, x, state, weight, "weight", weight.dim(1), weight.dim(0), out);
  if (x.device() == Device::cuda) return cuda::causal_conv1d_silu_taps(x, state, conv1d_taps(weight), out);
  cpu::causal_conv1d_silu(x, state, weight, out);
}

Tensor conv1d_taps(const Tensor& weight) {
  constexpr const char* kOp = "conv1d_taps";
  detail::require_defined(kOp, "weight", weight);
  detail::require_float(kOp, "weight", weight);
  SANCTUM_REQUIRE(weight.ndim() == 2 && weight.dim(1) >= 1, kOp, "weight must be (channels, kernel), got " + dims(weight));
  // A load-time rearrangement: a GPU weight goes through the host and comes back.
  if (weight.device() != Device::cpu) return conv1d_taps(weight.to(Device::cpu)).to(weight.device());
  const int64_t channels = weight.dim(0), kernel = weight.dim(1);
  Tensor taps = Tensor::zeros({kernel, channels}, DType::f32);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t j = 0; j < kernel; ++j)
      taps.data<float>()[j * channels + c] = load_as_f32(weight.raw(), weight.dtype(), c * weight.stride(0) + j * weight.stride(1));
  return taps;
}

void causal_conv1d_silu_taps(const Tensor& x, Tensor& state, const Tensor& taps, Tensor& out) {
  constexpr const char* kOp = "causal_conv1d_silu_taps";
  detail::require_defined(kOp, "taps", taps);
  detail::require_dtype(kOp, "taps", taps, DType::f32);
  SANCTUM_REQUIRE(taps.ndim() == 2 && taps.dim(0) >= 1, kOp, "taps must be (kernel, channels), got " + dims(taps));
  detail::require_inner_contiguous(kOp, "taps", taps);
  check_conv(kOp, x, state, taps, "taps", taps.dim(0), taps.dim(1), out);
  if (x.device() == Device::cuda) return cuda::causal_conv1d_silu_taps(x, state, taps, out);
  cpu::causal_conv1d_silu_taps(x, state, taps, out);
}

void causal_conv1d_silu_taps_rows(const Tensor& x, std::span<const int64_t> rows, std::span<Tensor* const> states, const Tensor& taps,
                                  Tensor& out) {
  constexpr const char* kOp = "causal_conv1d_silu_taps_rows";
  detail::require_defined(kOp, "taps", taps);
  detail::require_dtype(kOp, "taps", taps, DType::f32);
  SANCTUM_REQUIRE(taps.ndim() == 2 && taps.dim(0) >= 1, kOp, "taps must be (kernel, channels), got " + dims(taps));
  detail::require_inner_contiguous(kOp, "taps", taps);
  require_f32_matrix(kOp, "x", x);
  require_f32_matrix(kOp, "out", out);
  SANCTUM_REQUIRE(out.dim(0) == x.dim(0), kOp, "out " + dims(out) + " must have the rows of x " + dims(x));
  check_rows(kOp, x.dim(0), rows, states);
  for (size_t i = 0; i < rows.size(); ++i) {
    check_conv(kOp, x.slice(0, rows[i], rows[i] + 1), *states[i], taps, "taps", taps.dim(0), taps.dim(1),
               out.slice(0, rows[i], rows[i] + 1));
    SANCTUM_REQUIRE(taps.dim(0) == 1 || states[i]->stride(0) == states[0]->stride(0), kOp, "every state must have the first's row stride");
  }
  if (rows.empty()) return;
  SANCTUM_REQUIRE(!overlap(out, x), kOp, "out must not alias x");
  if (x.device() == Device::cuda) return cuda::causal_conv1d_silu_taps_rows(x, rows, states, taps, out);
  cpu::causal_conv1d_silu_taps_rows(x, rows, states, taps, out);
}

namespace {

// The checks of gated_delta_rule; returns the one device of its tensors.
Device check_rule(const char* kOp, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                  const Tensor& dt_bias, const GatedDeltaShape& shape, const Tensor& state, const Tensor& out) {
  const int64_t hk = shape.n_key_heads, dk = shape.key_dim, hv = shape.n_value_heads, dv = shape.value_dim;
  SANCTUM_REQUIRE(hk > 0 && dk > 0 && hv > 0 && dv > 0, kOp, "head counts and dims must be positive");
  SANCTUM_REQUIRE(hv % hk == 0, kOp,
                  "value heads (" + std::to_string(hv) + ") must be a multiple of key heads (" + std::to_string(hk) + ")");
  require_f32_matrix(kOp, "q", q);
  require_f32_matrix(kOp, "k", k);
  require_f32_matrix(kOp, "v", v);
  require_f32_matrix(kOp, "a", a);
  require_f32_matrix(kOp, "b", b);
  require_f32_matrix(kOp, "out", out);
  require_per_head(kOp, "a_log", a_log, hv);
  require_per_head(kOp, "dt_bias", dt_bias, hv);
  detail::require_defined(kOp, "state", state);
  detail::require_dtype(kOp, "state", state, DType::f32);
  const Device device = detail::require_one_device(
      kOp,
      {{"q", &q}, {"k", &k}, {"v", &v}, {"a", &a}, {"b", &b}, {"a_log", &a_log}, {"dt_bias", &dt_bias}, {"state", &state}, {"out", &out}});
  const int64_t n = q.dim(0);
  auto want = [&](const char* name, const Tensor& t, int64_t cols) {
    SANCTUM_REQUIRE(t.dim(0) == n && t.dim(1) == cols, kOp,
                    std::string(name) + " must be (" + std::to_string(n) + ", " + std::to_string(cols) + "), got " + dims(t));
  };
  want("q", q, hk * dk);
  want("k", k, hk * dk);
  want("v", v, hv * dv);
  want("a", a, hv);
  want("b", b, hv);
  want("out", out, hv * dv);
  SANCTUM_REQUIRE(state.ndim() == 3 && state.dim(0) == hv && state.dim(1) == dv && state.dim(2) == dk && state.is_contiguous(), kOp,
                  "state must be a contiguous (Hv, Dv, Dk) = (" + std::to_string(hv) + ", " + std::to_string(dv) + ", " +
                      std::to_string(dk) + ") tensor, got " + dims(state));
  for (const auto& [name, t] : {detail::Named{"q", &q}, {"k", &k}, {"v", &v}, {"a", &a}, {"b", &b}, {"state", &state}})
    SANCTUM_REQUIRE(!overlap(out, *t), kOp, std::string("out must not alias ") + name);
  for (const auto& [name, t] : {detail::Named{"q", &q}, {"k", &k}, {"v", &v}, {"a", &a}, {"b", &b}})
    SANCTUM_REQUIRE(!overlap(state, *t), kOp, std::string("state must not alias ") + name);
  return device;
}

}  // namespace

void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                      const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out, GatedDeltaAlgorithm algorithm) {
  const Device device = check_rule("gated_delta_rule", q, k, v, a, b, a_log, dt_bias, shape, state, out);
  const int64_t n = q.dim(0);
  if (algorithm == GatedDeltaAlgorithm::automatic)
    algorithm = n >= kChunkedFromTokens ? GatedDeltaAlgorithm::chunked : GatedDeltaAlgorithm::sequential;
  if (device == Device::cuda) return cuda::gated_delta_rule(q, k, v, a, b, a_log, dt_bias, shape, state, out, algorithm);
  if (algorithm == GatedDeltaAlgorithm::chunked) cpu::gated_delta_chunked(q, k, v, a, b, a_log, dt_bias, shape, state, out);
  else cpu::gated_delta_sequential(q, k, v, a, b, a_log, dt_bias, shape, state, out);
}

void gated_delta_rule_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                           const Tensor& dt_bias, const GatedDeltaShape& shape, std::span<const int64_t> rows,
                           std::span<Tensor* const> states, Tensor& out) {
  constexpr const char* kOp = "gated_delta_rule_rows";
  for (const auto& [name, t] : {detail::Named{"q", &q}, {"k", &k}, {"v", &v}, {"a", &a}, {"b", &b}, {"out", &out}}) {
    require_f32_matrix(kOp, name, *t);
    SANCTUM_REQUIRE(t->dim(0) == q.dim(0), kOp,
                    std::string(name) + " " + dims(*t) + " must have the " + std::to_string(q.dim(0)) + " rows of q");
  }
  check_rows(kOp, q.dim(0), rows, states);
  if (rows.empty()) return;
  Device device = Device::cpu;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t r = rows[i];
    device = check_rule(kOp, q.slice(0, r, r + 1), k.slice(0, r, r + 1), v.slice(0, r, r + 1), a.slice(0, r, r + 1), b.slice(0, r, r + 1),
                        a_log, dt_bias, shape, *states[i], out.slice(0, r, r + 1));
  }
  if (device == Device::cuda) return cuda::gated_delta_rule_rows(q, k, v, a, b, a_log, dt_bias, shape, rows, states, out);
  cpu::gated_delta_sequential_rows(q, k, v, a, b, a_log, dt_bias, shape, rows, states, out);
}

void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out) {
  constexpr const char* kOp = "gated_rms_norm";
  require_f32_matrix(kOp, "x", x);
  require_f32_matrix(kOp, "z", z);
  require_f32_matrix(kOp, "out", out);
  detail::require_defined(kOp, "weight", weight);
  detail::require_float(kOp, "weight", weight);
  const Device device = detail::require_one_device(kOp, {{"x", &x}, {"z", &z}, {"weight", &weight}, {"out", &out}});
  SANCTUM_REQUIRE(weight.ndim() == 1 && weight.dim(0) > 0, kOp, "weight must be a (d) vector, got " + dims(weight));
  detail::require_inner_contiguous(kOp, "weight", weight);
  const int64_t d = weight.dim(0);
  SANCTUM_REQUIRE(x.dim(1) % d == 0, kOp, "x rows (" + std::to_string(x.dim(1)) + ") must be whole heads of " + std::to_string(d));
  SANCTUM_REQUIRE(detail::same_shape(x, z) && detail::same_shape(x, out), kOp,
                  "x " + dims(x) + ", z " + dims(z) + " and out " + dims(out) + " must have one shape");
  SANCTUM_REQUIRE(eps >= 0.0f, kOp, "eps must be >= 0");
  SANCTUM_REQUIRE(same_view(out, x) || !overlap(out, x), kOp, "out may alias x only exactly");
  SANCTUM_REQUIRE(same_view(out, z) || !overlap(out, z), kOp, "out may alias z only exactly");
  if (device == Device::cuda) return cuda::gated_rms_norm(x, z, weight, eps, out);
  cpu::gated_rms_norm(x, z, weight, eps, out);
}

}  // namespace sanctum::ops

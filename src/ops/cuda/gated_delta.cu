// GatedDeltaNet on the GPU: the causal depthwise conv with its rolling state, and the gated delta
// rule. The rule runs all value heads at once: each warp owns a few rows of one head's (Dv, Dk) f32
// state in registers (Dk spread over the lanes) and walks the tokens, so decode is one launch per
// layer and the state never leaves registers within a call; reductions over Dk are warp shuffles.
#include <algorithm>

#include "ops/cuda/common.cuh"
#include "ops/cuda/kernels.h"

namespace sanctum::ops::cuda {

namespace {

constexpr int kMaxKernel = 8;

// Thread per channel, sequential over tokens with the window in registers.
__global__ void conv1d_silu_kernel(Rows<const float> x, float* state, int64_t state_stride, const float* taps, int kernel,
                                   int64_t channels, Rows<float> out) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  const int hist = kernel - 1;
  float window[kMaxKernel];  // window[j] = input at t - hist + j
  float w[kMaxKernel];
#pragma unroll
  for (int j = 0; j < kMaxKernel; ++j) {
    window[j] = (j < hist) ? state[j * state_stride + c] : 0.0f;
    w[j] = j < kernel ? taps[j * channels + c] : 0.0f;
  }
  for (int64_t t = 0; t < x.rows; ++t) {
    window[hist] = x.data[t * x.stride + c];
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxKernel; ++j)
      if (j < kernel) acc += w[j] * window[j];
    out.data[t * out.stride + c] = silu(acc);
#pragma unroll
    for (int j = 0; j + 1 < kMaxKernel; ++j)
      if (j < hist) window[j] = window[j + 1];
  }
#pragma unroll
  for (int j = 0; j < kMaxKernel; ++j)
    if (j < hist) state[j * state_stride + c] = window[j];
}

struct RuleArgs {
  Rows<const float> q, k, v, a, b;
  const void* a_log;
  const void* dt_bias;
  FloatKind a_log_kind, dt_bias_kind;
  float* state;
  Rows<float> out;
  int64_t dk, dv, group;
  float q_scale;
};

constexpr int kRuleWarps = 4;

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

template <int PL, int RPW>
__global__ void __launch_bounds__(kRuleWarps * 32) gated_delta_kernel(RuleArgs r) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t h = blockIdx.x, kh = h / r.group;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.y) * kRuleWarps + warp) * RPW;
  if (row0 >= r.dv) return;
  float* s = r.state + h * r.dv * r.dk;
  float S[RPW][PL];
#pragma unroll
  for (int i = 0; i < RPW; ++i)
#pragma unroll
    for (int p = 0; p < PL; ++p) {
      const int64_t row = row0 + i, c = lane + 32 * p;
      S[i][p] = (row < r.dv && c < r.dk) ? s[row * r.dk + c] : 0.0f;
    }
  const float A = expf(load_float(r.a_log, r.a_log_kind, h));
  const float dt_bias = load_float(r.dt_bias, r.dt_bias_kind, h);
  for (int64_t t = 0; t < r.q.rows; ++t) {
    const float* qr = r.q.data + t * r.q.stride + kh * r.dk;
    const float* kr = r.k.data + t * r.k.stride + kh * r.dk;
    float qv[PL], kv[PL], qss = 0.0f, kss = 0.0f;
#pragma unroll
    for (int p = 0; p < PL; ++p) {
      const int64_t c = lane + 32 * p;
      qv[p] = c < r.dk ? qr[c] : 0.0f;
      kv[p] = c < r.dk ? kr[c] : 0.0f;
      qss += qv[p] * qv[p];
      kss += kv[p] * kv[p];
    }
    const float q_inv = r.q_scale / sqrtf(warp_sum(qss) + 1e-6f);
    const float k_inv = 1.0f / sqrtf(warp_sum(kss) + 1e-6f);
#pragma unroll
    for (int p = 0; p < PL; ++p) {
      qv[p] *= q_inv;
      kv[p] *= k_inv;
    }
    const float beta = sigmoid(r.b.data[t * r.b.stride + h]);
    const float g = expf(-A * softplus(r.a.data[t * r.a.stride + h] + dt_bias));
    float dot[RPW];
#pragma unroll
    for (int i = 0; i < RPW; ++i) {
      float d = 0.0f;
#pragma unroll
      for (int p = 0; p < PL; ++p) {
        S[i][p] *= g;
        d += S[i][p] * kv[p];
      }
      dot[i] = d;
    }
#pragma unroll
    for (int i = 0; i < RPW; ++i) dot[i] = warp_sum(dot[i]);
    const float* vr = r.v.data + t * r.v.stride + h * r.dv;
    float y[RPW];
#pragma unroll
    for (int i = 0; i < RPW; ++i) {
      const int64_t row = row0 + i;
      const float delta = row < r.dv ? (vr[row] - dot[i]) * beta : 0.0f;
      float acc = 0.0f;
#pragma unroll
      for (int p = 0; p < PL; ++p) {
        S[i][p] += delta * kv[p];
        acc += S[i][p] * qv[p];
      }
      y[i] = acc;
    }
#pragma unroll
    for (int i = 0; i < RPW; ++i) y[i] = warp_sum(y[i]);
    if (lane == 0) {
      float* o = r.out.data + t * r.out.stride + h * r.dv;
#pragma unroll
      for (int i = 0; i < RPW; ++i)
        if (row0 + i < r.dv) o[row0 + i] = y[i];
    }
  }
#pragma unroll
  for (int i = 0; i < RPW; ++i)
#pragma unroll
    for (int p = 0; p < PL; ++p) {
      const int64_t row = row0 + i, c = lane + 32 * p;
      if (row < r.dv && c < r.dk) s[row * r.dk + c] = S[i][p];
    }
}

template <int PL>
void launch_rule(const RuleArgs& r, int64_t hv) {
  constexpr int kRowsPerWarp = 4;
  const unsigned row_blocks = static_cast<unsigned>((r.dv + kRuleWarps * kRowsPerWarp - 1) / (kRuleWarps * kRowsPerWarp));
  gated_delta_kernel<PL, kRowsPerWarp><<<dim3(static_cast<unsigned>(hv), row_blocks), kRuleWarps * 32, 0, stream()>>>(r);
}

}  // namespace

void causal_conv1d_silu_taps(const Tensor& x, Tensor& state, const Tensor& taps, Tensor& out) {
  const int kernel = static_cast<int>(taps.dim(0));
  check(kernel <= kMaxKernel, ErrorKind::unsupported,
        "[causal_conv1d_silu] cuda supports conv kernels up to " + std::to_string(kMaxKernel) + " taps, got " + std::to_string(kernel));
  const auto rx = rows_of<const float>(x, "causal_conv1d_silu");
  const auto ro = rows_of<float>(out, "causal_conv1d_silu");
  const int64_t channels = x.dim(1);
  if (channels == 0) return;
  const int64_t state_stride = kernel > 1 ? state.stride(0) : 0;
  conv1d_silu_kernel<<<blocks_for(channels, 128), 128, 0, stream()>>>(rx, state.data<float>(), state_stride, taps.data<float>(), kernel,
                                                                      channels, ro);
  check_launch("causal_conv1d_silu");
}

void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                      const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out, GatedDeltaAlgorithm) {
  // One kernel serves every length: it is parallel over heads and state rows, which on a GPU is
  // enough to keep prefill of a few thousand tokens a small share of the step.
  if (q.dim(0) == 0) return;
  check(shape.key_dim <= 256, ErrorKind::unsupported, "[gated_delta_rule] cuda supports key heads up to 256 dims");
  RuleArgs r;
  r.q = rows_of<const float>(q, "gated_delta_rule");
  r.k = rows_of<const float>(k, "gated_delta_rule");
  r.v = rows_of<const float>(v, "gated_delta_rule");
  r.a = rows_of<const float>(a, "gated_delta_rule");
  r.b = rows_of<const float>(b, "gated_delta_rule");
  r.a_log = a_log.raw();
  r.dt_bias = dt_bias.raw();
  r.a_log_kind = float_kind(a_log);
  r.dt_bias_kind = float_kind(dt_bias);
  r.state = state.data<float>();
  r.out = rows_of<float>(out, "gated_delta_rule");
  r.dk = shape.key_dim;
  r.dv = shape.value_dim;
  r.group = shape.n_value_heads / shape.n_key_heads;
  r.q_scale = 1.0f / sqrtf(static_cast<float>(shape.key_dim));
  const int64_t pl = (shape.key_dim + 31) / 32;
  if (pl <= 1) launch_rule<1>(r, shape.n_value_heads);
  else if (pl <= 2) launch_rule<2>(r, shape.n_value_heads);
  else if (pl <= 4) launch_rule<4>(r, shape.n_value_heads);
  else launch_rule<8>(r, shape.n_value_heads);
  check_launch("gated_delta_rule");
}

}  // namespace sanctum::ops::cuda

#include "ops/ref/gated_delta.h"

#include <cmath>
#include <vector>

#include "ops/op_util.h"

namespace sanctum::ops::ref {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch's softplus (threshold 20); mlx's logaddexp(x, 0) agrees to rounding.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x / sqrt(sum x^2 + 1e-6) * scale over d values.
void l2_normalize(const float* x, int64_t d, float scale, float* out) {
  float ss = 0.0f;
  for (int64_t i = 0; i < d; ++i) ss += x[i] * x[i];
  const float inv = scale / std::sqrt(ss + 1e-6f);
  for (int64_t i = 0; i < d; ++i) out[i] = x[i] * inv;
}

}  // namespace

void causal_conv1d_silu(const Tensor& x, Tensor& state, const Tensor& weight, Tensor& out) {
  const int64_t n = x.dim(0), channels = x.dim(1), kernel = weight.dim(1), hist = kernel - 1;
  // in row i of [state; x]: state row i for i < hist, else x row i - hist.
  auto in = [&](int64_t i, int64_t c) {
    return i < hist ? detail::row_ptr<const float>(state, i)[c] : detail::row_ptr<const float>(x, i - hist)[c];
  };
  for (int64_t t = 0; t < n; ++t) {
    float* o = detail::row_ptr<float>(out, t);
    for (int64_t c = 0; c < channels; ++c) {
      float acc = 0.0f;
      for (int64_t j = 0; j < kernel; ++j) acc += load_as_f32(weight.raw(), weight.dtype(), c * weight.stride(0) + j) * in(t + j, c);
      o[c] = silu(acc);
    }
  }
  // New state: the last hist rows of [state; x] (computed before any row is overwritten).
  std::vector<float> next(static_cast<size_t>(hist * channels));
  for (int64_t i = 0; i < hist; ++i)
    for (int64_t c = 0; c < channels; ++c) next[static_cast<size_t>(i * channels + c)] = in(n + i, c);
  for (int64_t i = 0; i < hist; ++i)
    for (int64_t c = 0; c < channels; ++c) detail::row_ptr<float>(state, i)[c] = next[static_cast<size_t>(i * channels + c)];
}

void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                      const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out) {
  const int64_t n = q.dim(0), hk = shape.n_key_heads, dk = shape.key_dim, hv = shape.n_value_heads, dv = shape.value_dim, group = hv / hk;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  std::vector<float> qn(static_cast<size_t>(dk)), kn(static_cast<size_t>(dk));
  for (int64_t t = 0; t < n; ++t) {
    const float* qr = detail::row_ptr<const float>(q, t);
    const float* kr = detail::row_ptr<const float>(k, t);
    const float* vr = detail::row_ptr<const float>(v, t);
    const float* ar = detail::row_ptr<const float>(a, t);
    const float* br = detail::row_ptr<const float>(b, t);
    float* o = detail::row_ptr<float>(out, t);
    for (int64_t h = 0; h < hv; ++h) {
      const int64_t kh = h / group;
      l2_normalize(qr + kh * dk, dk, q_scale, qn.data());
      l2_normalize(kr + kh * dk, dk, 1.0f, kn.data());
      const float beta = sigmoid(br[h]);
      const float g = std::exp(-std::exp(load_as_f32(a_log.raw(), a_log.dtype(), h)) *
                               softplus(ar[h] + load_as_f32(dt_bias.raw(), dt_bias.dtype(), h)));
      float* s = state.data<float>() + h * dv * dk;  // (Dv, Dk)
      for (int64_t r = 0; r < dv; ++r) {
        float* sr = s + r * dk;
        float kv = 0.0f;
        for (int64_t c = 0; c < dk; ++c) {
          sr[c] *= g;
          kv += sr[c] * kn[static_cast<size_t>(c)];
        }
        const float delta = (vr[h * dv + r] - kv) * beta;
        float y = 0.0f;
        for (int64_t c = 0; c < dk; ++c) {
          sr[c] += delta * kn[static_cast<size_t>(c)];
          y += sr[c] * qn[static_cast<size_t>(c)];
        }
        o[h * dv + r] = y;
      }
    }
  }
}

void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out) {
  const int64_t rows = x.dim(0), width = x.dim(1), d = weight.dim(0), heads = width / d;
  std::vector<float> tmp(static_cast<size_t>(d));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = detail::row_ptr<const float>(x, r);
    const float* zr = detail::row_ptr<const float>(z, r);
    float* o = detail::row_ptr<float>(out, r);
    for (int64_t h = 0; h < heads; ++h) {
      float ss = 0.0f;
      for (int64_t i = 0; i < d; ++i) ss += xr[h * d + i] * xr[h * d + i];
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
      for (int64_t i = 0; i < d; ++i)
        tmp[static_cast<size_t>(i)] = xr[h * d + i] * inv * load_as_f32(weight.raw(), weight.dtype(), i) * silu(zr[h * d + i]);
      for (int64_t i = 0; i < d; ++i) o[h * d + i] = tmp[static_cast<size_t>(i)];
    }
  }
}

}  // namespace sanctum::ops::ref

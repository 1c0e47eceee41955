// The vision encoder's elementwise ops on the GPU: LayerNorm (one block per row, the mean first and
// then the variance of the centred values, as torch computes a biased variance) and GELU in its erf
// and tanh forms. f32 in and out, sums in f32.
#include "ops/cuda/common.cuh"
#include "ops/cuda/kernels.h"

namespace sanctum::ops::cuda {

namespace {

constexpr int kNormThreads = 256;

// Row blockIdx.x of x into out (which may be x: each thread rewrites only the values it read).
__global__ void layer_norm_kernel(Rows<const float> x, const void* w, FloatKind w_kind, const void* b, FloatKind b_kind, float eps,
                                  Rows<float> out) {
  __shared__ float scratch[32];
  const float* xr = x.data + blockIdx.x * x.stride;
  float* o = out.data + blockIdx.x * out.stride;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) s += xr[c];
  const float mean = block_sum(s, scratch) / static_cast<float>(x.cols);
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) {
    const float d = xr[c] - mean;
    ss += d * d;
  }
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(x.cols) + eps);
  for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x)
    o[c] = (xr[c] - mean) * inv * load_float(w, w_kind, c) + load_float(b, b_kind, c);
}

// Thread per element of (rows, cols); ERF picks the exact form.
template <bool ERF>
__global__ void gelu_kernel(Rows<const float> x, Rows<float> out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= x.rows * x.cols) return;
  const int64_t r = i / x.cols, c = i % x.cols;
  const float v = x.data[r * x.stride + c];
  float g;
  if constexpr (ERF) {
    g = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  } else {
    constexpr float kSqrt2OverPi = 0.79788456080286536f;
    g = 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
  out.data[r * out.stride + c] = g;
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) {
  const auto rx = rows_of<const float>(x, "layer_norm");
  const auto ro = rows_of<float>(out, "layer_norm");
  if (rx.rows == 0 || rx.cols == 0) return;
  check(rx.rows <= 0x7fffffff, ErrorKind::unsupported, "[layer_norm] at most 2^31 - 1 rows per call on cuda: split x");
  layer_norm_kernel<<<static_cast<unsigned>(rx.rows), kNormThreads, 0, stream()>>>(rx, weight.raw(), float_kind(weight), bias.raw(),
                                                                                   float_kind(bias), eps, ro);
  check_launch("layer_norm");
}

void gelu(const Tensor& x, Tensor& out, GeluKind kind) {
  const auto rx = rows_of<const float>(x, "gelu");
  const auto ro = rows_of<float>(out, "gelu");
  const int64_t total = rx.rows * rx.cols;
  if (total == 0) return;
  constexpr int kThreads = 256;
  if (kind == GeluKind::erf) gelu_kernel<true><<<blocks_for(total, kThreads), kThreads, 0, stream()>>>(rx, ro);
  else gelu_kernel<false><<<blocks_for(total, kThreads), kThreads, 0, stream()>>>(rx, ro);
  check_launch("gelu");
}

}  // namespace sanctum::ops::cuda

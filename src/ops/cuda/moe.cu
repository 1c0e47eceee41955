// MoE row movement: gather/scatter of token rows by index, and the weighted sum of expert outputs.
#include "ops/cuda/common.cuh"
#include "ops/cuda/host_values.cuh"
#include "ops/cuda/kernels.h"

namespace sanctum::ops::cuda {

namespace {

__global__ void copy_rows_kernel(const float* src, int64_t src_stride, const int32_t* src_rows, float* dst, int64_t dst_stride,
                                 const int32_t* dst_rows, int64_t count, int64_t d) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count * d) return;
  const int64_t r = i / d, c = i % d;
  dst[dst_rows[r] * dst_stride + c] = src[src_rows[r] * src_stride + c];
}

__global__ void moe_combine_kernel(const float* per_rank, int64_t pr_stride, const float* w, int64_t k, const float* shared,
                                   int64_t sh_stride, const float* sw, float* out, int64_t out_stride, int64_t n, int64_t d) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * d) return;
  const int64_t t = i / d, j = i % d;
  float o = 0.0f;
  for (int64_t r = 0; r < k; ++r) o += w[t * k + r] * per_rank[(t * k + r) * pr_stride + j];
  if (shared != nullptr) o += sw[t] * shared[t * sh_stride + j];
  out[t * out_stride + j] = o;
}

// Warp per token: top-k by repeated arg-max (ties → lower id), then the weights exactly as the host's
// route_token computes them (double softmax sums).
__global__ void moe_route_kernel(const float* logits, int64_t stride, int64_t n, int E, int k, bool softmax_first, bool normalize,
                                 int32_t* ids, float* weights) {
  const int lane = threadIdx.x & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (t >= n) return;
  const float* l = logits + t * stride;
  int32_t chosen[32];
  float chosen_logit[32];
  for (int r = 0; r < k; ++r) {
    float best = -INFINITY;
    int best_id = 0x7fffffff;
    for (int e = lane; e < E; e += 32) {
      bool taken = false;
      for (int j = 0; j < r; ++j) taken |= chosen[j] == e;
      if (taken) continue;
      const float v = l[e];
      if (v > best || (v == best && e < best_id) || best_id == 0x7fffffff) {
        best = v;
        best_id = e;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best_id, o);
      if (oi != 0x7fffffff && (best_id == 0x7fffffff || ov > best || (ov == best && oi < best_id))) {
        best = ov;
        best_id = oi;
      }
    }
    chosen[r] = best_id;
    chosen_logit[r] = best;
  }
  const float m = chosen_logit[0];
  double total = 0.0;
  if (softmax_first) {
    for (int e = lane; e < E; e += 32) total += exp(static_cast<double>(l[e] - m));
    for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
  }
  if (lane != 0) return;
  int32_t* id = ids + t * k;
  float* w = weights + t * k;
  for (int r = 0; r < k; ++r) id[r] = chosen[r];
  if (softmax_first) {
    double kept = 0.0;
    for (int r = 0; r < k; ++r) {
      w[r] = static_cast<float>(exp(static_cast<double>(chosen_logit[r] - m)) / total);
      kept += w[r];
    }
    if (normalize)
      for (int r = 0; r < k; ++r) w[r] = static_cast<float>(w[r] / kept);
  } else {
    double sum = 0.0;
    for (int r = 0; r < k; ++r) sum += exp(static_cast<double>(chosen_logit[r] - m));
    for (int r = 0; r < k; ++r) w[r] = static_cast<float>(exp(static_cast<double>(chosen_logit[r] - m)) / sum);
  }
}

__global__ void moe_combine_device_kernel(const float* per_rank, int64_t pr_stride, const float* w, int64_t k, const float* shared,
                                          int64_t sh_stride, const float* shared_logit, int64_t sl_stride, float* out, int64_t out_stride,
                                          int64_t n, int64_t d) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * d) return;
  const int64_t t = i / d, j = i % d;
  float o = 0.0f;
  for (int64_t r = 0; r < k; ++r) o += w[t * k + r] * per_rank[(t * k + r) * pr_stride + j];
  if (shared != nullptr) {
    const float g = 1.0f / (1.0f + expf(-shared_logit[t * sl_stride]));
    o += g * shared[t * sh_stride + j];
  }
  out[t * out_stride + j] = o;
}

}  // namespace

void moe_route(const Tensor& logits, const MoeRouting& routing, Tensor& ids, Tensor& weights) {
  const int64_t n = logits.dim(0);
  constexpr int kWarps = 4;
  moe_route_kernel<<<static_cast<unsigned>((n + kWarps - 1) / kWarps), kWarps * 32, 0, stream()>>>(
      logits.data<float>(), logits.stride(0), n, static_cast<int>(logits.dim(1)), static_cast<int>(routing.top_k), routing.softmax_first,
      routing.normalize, ids.data<int32_t>(), weights.data<float>());
  check_launch("moe_route");
}

void moe_combine_device(const Tensor& per_rank, const Tensor& weights, const Tensor* shared, const Tensor* shared_logit, Tensor& out) {
  const int64_t n = out.dim(0), d = out.dim(1), k = weights.numel() / n;
  moe_combine_device_kernel<<<blocks_for(n * d, 256), 256, 0, stream()>>>(
      per_rank.data<float>(), per_rank.stride(0), weights.data<float>(), k, shared ? shared->data<float>() : nullptr,
      shared ? shared->stride(0) : 0, shared_logit ? shared_logit->data<float>() : nullptr, shared_logit ? shared_logit->stride(0) : 0,
      out.data<float>(), out.stride(0), n, d);
  check_launch("moe_combine");
}

void copy_rows(const Tensor& src, std::span<const int32_t> src_rows, Tensor& dst, std::span<const int32_t> dst_rows) {
  const int64_t count = static_cast<int64_t>(src_rows.size()), d = src.dim(1);
  const int32_t* s = device_ints(HostSlot::source_rows, src_rows);
  const int32_t* t = device_ints(HostSlot::target_rows, dst_rows);
  copy_rows_kernel<<<blocks_for(count * d, 256), 256, 0, stream()>>>(src.data<float>(), src.stride(0), s, dst.data<float>(), dst.stride(0), t,
                                                                   count, d);
  check_launch("copy_rows");
}

void moe_combine(const Tensor& per_rank, std::span<const float> weights, const Tensor* shared, std::span<const float> shared_weights,
                 Tensor& out) {
  const int64_t n = out.dim(0), d = out.dim(1), k = per_rank.dim(0) / n;
  const float* w = device_floats(HostFloatSlot::expert_weights, weights);
  const float* sw = shared ? device_floats(HostFloatSlot::shared_weights, shared_weights) : nullptr;
  moe_combine_kernel<<<blocks_for(n * d, 256), 256, 0, stream()>>>(per_rank.data<float>(), per_rank.stride(0), w, k,
                                                                 shared ? shared->data<float>() : nullptr, shared ? shared->stride(0) : 0, sw,
                                                                 out.data<float>(), out.stride(0), n, d);
  check_launch("moe_combine");
}

}  // namespace sanctum::ops::cuda

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

}  // namespace

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

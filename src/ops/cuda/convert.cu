#include "ops/cuda/convert.cuh"

#include "ops/cuda/common.cuh"
#include "ops/cuda/tensor_core.cuh"

namespace sanctum::ops::cuda {

namespace {

// Four values a thread; 32-bit indices (the caller checks n * k < 2^32).
__global__ void rows_to_bf16_x4(const float* __restrict__ x, int64_t stride, uint32_t n, uint32_t k, __nv_bfloat16* __restrict__ out) {
  const uint32_t i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i >= n * k) return;
  const uint32_t row = i / k, col = i - row * k;
  const float4 v = *reinterpret_cast<const float4*>(x + row * stride + col);
  *reinterpret_cast<uint2*>(out + i) = make_uint2(tc::bf16_pair(v.x, v.y), tc::bf16_pair(v.z, v.w));
}

// Any shape or alignment: one value a thread.
__global__ void rows_to_bf16_x1(const float* x, int64_t stride, int64_t n, int64_t k, __nv_bfloat16* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * k) return;
  out[i] = __float2bfloat16(x[(i / k) * stride + i % k]);
}

}  // namespace

void rows_to_bf16(const float* x, int64_t stride, int64_t n, int64_t k, __nv_bfloat16* out) {
  if (k % 4 == 0 && stride % 4 == 0 && aligned16(x) && n * k < (int64_t{1} << 32))
    rows_to_bf16_x4<<<blocks_for(n * k / 4, 256), 256, 0, stream()>>>(x, stride, static_cast<uint32_t>(n), static_cast<uint32_t>(k), out);
  else rows_to_bf16_x1<<<blocks_for(n * k, 256), 256, 0, stream()>>>(x, stride, n, k, out);
  check_launch("rows_to_bf16");
}

}  // namespace sanctum::ops::cuda

// RoPE (rotate-half, partial rotary) and embedding lookup (dense or MLX-quantized tables).
#include "ops/cuda/common.cuh"
#include "ops/cuda/host_values.cuh"
#include "ops/cuda/kernels.h"

namespace sanctum::ops::cuda {

namespace {

// Thread per (token, head, pair j < half). cos/sin of the f32 angle in double, as the reference does.
__global__ void rope_kernel(float* x, int64_t n, int64_t heads, int64_t s0, int64_t s1, int64_t half, const int32_t* positions,
                            const float* inv_freq, float magnitude) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * heads * half) return;
  const int64_t j = i % half, h = (i / half) % heads, t = i / (half * heads);
  float* v = x + t * s0 + h * s1;
  const float angle = static_cast<float>(positions[t]) * inv_freq[j];
  double s, c;
  sincos(static_cast<double>(angle), &s, &c);
  c *= magnitude;
  s *= magnitude;
  const double a = v[j], b = v[j + half];
  v[j] = static_cast<float>(a * c - b * s);
  v[j + half] = static_cast<float>(b * c + a * s);
}

}  // namespace

void rope(Tensor& x, std::span<const int32_t> positions, const int32_t* device_positions, const RopeTable& table) {
  const int64_t n = x.dim(0), heads = x.dim(1), half = table.rotary_dim() / 2;
  if (n == 0 || heads == 0 || half == 0) return;
  const int32_t* pos = device_positions != nullptr ? device_positions : device_ints(HostSlot::positions, positions);
  const float* inv = device_table(table.inv_freq());
  const int64_t total = n * heads * half;
  launch_early(rope_kernel, dim3(blocks_for(total, 256)), dim3(256), 0, x.data<float>(), n, heads, x.stride(0), x.stride(1), half, pos, inv,
               table.magnitude());
  check_launch("rope");
}

}  // namespace sanctum::ops::cuda

// RoPE (rotate-half, partial rotary) and embedding lookup (dense or MLX-quantized tables).
#include "ops/cuda/common.cuh"
#include "ops/cuda/host_values.cuh"
#include "ops/cuda/kernels.h"

namespace sanctum::ops::cuda {

namespace {

// Rotates the pair (j, j + half) of one head's row v at `position`; cos/sin of the f32 angle in
// double, as the reference does. The rotated values also go to `copy` when it is set.
__device__ __forceinline__ void rotate_pair(float* v, int64_t j, int64_t half, int32_t position, const float* inv_freq, float magnitude,
                                            float* copy) {
  const float angle = static_cast<float>(position) * inv_freq[j];
  double s, c;
  sincos(static_cast<double>(angle), &s, &c);
  c *= magnitude;
  s *= magnitude;
  const double a = v[j], b = v[j + half];
  const float lo = static_cast<float>(a * c - b * s), hi = static_cast<float>(b * c + a * s);
  v[j] = lo;
  v[j + half] = hi;
  if (copy != nullptr) {
    copy[j] = lo;
    copy[j + half] = hi;
  }
}

// Thread per (token, head, pair j < half).
__global__ void rope_kernel(float* x, int64_t n, int64_t heads, int64_t s0, int64_t s1, int64_t half, const int32_t* positions,
                            const float* inv_freq, float magnitude) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * heads * half) return;
  const int64_t j = i % half, h = (i / half) % heads, t = i / (half * heads);
  rotate_pair(x + t * s0 + h * s1, j, half, positions[t], inv_freq, magnitude, nullptr);
}

struct RopeStoreArgs {
  float* q;
  int64_t q_s0, q_s1, heads;
  float* k;
  int64_t k_s0, kv_heads;
  const float* v;
  int64_t v_s0;
  float* cache_k;
  float* cache_v;
  int64_t ck_s0, cv_s0;
  int64_t n, d, half;
  const int32_t* positions;
  const float* inv_freq;
  float magnitude;
};

// Three ranges of threads: the rotating pairs of every q and k head (k's rotated values written to
// the cache as well), then the dims of k past the rotary ones, then v. No thread reads what another
// writes, so one launch keeps the four ops' results.
__global__ void rope_store_kernel(RopeStoreArgs a) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t pairs = a.n * (a.heads + a.kv_heads) * a.half, kv_width = a.kv_heads * a.d, rest = a.d - 2 * a.half;
  if (i < pairs) {
    const int64_t j = i % a.half, h = (i / a.half) % (a.heads + a.kv_heads), t = i / (a.half * (a.heads + a.kv_heads));
    if (h < a.heads) return rotate_pair(a.q + t * a.q_s0 + h * a.q_s1, j, a.half, a.positions[t], a.inv_freq, a.magnitude, nullptr);
    const int64_t kh = h - a.heads;
    return rotate_pair(a.k + t * a.k_s0 + kh * a.d, j, a.half, a.positions[t], a.inv_freq, a.magnitude,
                       a.cache_k + a.positions[t] * a.ck_s0 + kh * a.d);
  }
  i -= pairs;
  if (i < a.n * a.kv_heads * rest) {
    const int64_t c = 2 * a.half + i % rest, kh = (i / rest) % a.kv_heads, t = i / (rest * a.kv_heads);
    a.cache_k[a.positions[t] * a.ck_s0 + kh * a.d + c] = a.k[t * a.k_s0 + kh * a.d + c];
    return;
  }
  i -= a.n * a.kv_heads * rest;
  if (i < a.n * kv_width) {
    const int64_t c = i % kv_width, t = i / kv_width;
    a.cache_v[a.positions[t] * a.cv_s0 + c] = a.v[t * a.v_s0 + c];
  }
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

void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, std::span<const int32_t> positions, const int32_t* device_positions,
                    const RopeTable& table, Tensor& cache_k, Tensor& cache_v) {
  RopeStoreArgs a{};
  a.q = q.data<float>();
  a.q_s0 = q.stride(0);
  a.q_s1 = q.stride(1);
  a.heads = q.dim(1);
  a.k = k.data<float>();
  a.k_s0 = k.stride(0);
  a.kv_heads = k.dim(1);
  a.v = v.data<float>();
  a.v_s0 = v.stride(0);
  a.cache_k = cache_k.data<float>();
  a.cache_v = cache_v.data<float>();
  a.ck_s0 = cache_k.stride(0);
  a.cv_s0 = cache_v.stride(0);
  a.n = k.dim(0);
  a.d = k.dim(2);
  a.half = table.rotary_dim() / 2;
  a.positions = device_positions != nullptr ? device_positions : device_ints(HostSlot::positions, positions);
  a.inv_freq = device_table(table.inv_freq());
  a.magnitude = table.magnitude();
  const int64_t total = a.n * ((a.heads + a.kv_heads) * a.half + a.kv_heads * (a.d - 2 * a.half) + a.kv_heads * a.d);
  launch_early(rope_store_kernel, dim3(blocks_for(total, 256)), dim3(256), 0, a);
  check_launch("rope_and_store");
}

}  // namespace sanctum::ops::cuda

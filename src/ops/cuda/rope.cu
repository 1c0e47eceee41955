// RoPE (rotate-half, partial rotary) and embedding lookup (dense or MLX-quantized tables).
#include <algorithm>

#include "ops/cuda/common.cuh"
#include "ops/cuda/host_values.cuh"
#include "ops/cuda/kernels.h"

namespace sanctum::ops::cuda {

namespace {

// cos and sin (times the magnitude) of pair j's f32 angle at `position`, in double, as the reference
// does.
__device__ __forceinline__ double2 cos_sin_at(int32_t position, int64_t j, const float* inv_freq, float magnitude) {
  const float angle = static_cast<float>(position) * inv_freq[j];
  double s, c;
  sincos(static_cast<double>(angle), &s, &c);
  return make_double2(c * magnitude, s * magnitude);
}

// Rotates the pair (j, j + half) of one head's row v by cs (cos_sin_at). The rotated values also go
// to `copy` when it is set.
__device__ __forceinline__ void rotate_pair(float* v, int64_t j, int64_t half, double2 cs, float* copy) {
  const double a = v[j], b = v[j + half];
  const float lo = static_cast<float>(a * cs.x - b * cs.y), hi = static_cast<float>(b * cs.x + a * cs.y);
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
  rotate_pair(x + t * s0 + h * s1, j, half, cos_sin_at(positions[t], j, inv_freq, magnitude), nullptr);
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
  int64_t heads_per_block;  // of the heads + kv_heads, q's first
  const int32_t* positions;
  const float* inv_freq;
  float magnitude;
};

// Block (t, y): token t's heads [y hpb, (y + 1) hpb) of q's then k's, k's rotated values written to
// the cache as well, and for each k head among them its dims past the rotary ones and its v row.
// The block takes its token's cos and sin once, into shared memory, where a thread per pair took
// them again for every head (a 4,096-token prompt of the 24B shape spent 137 us a layer here, most
// of it in the double sincos). The rotation is rope_kernel's: the bits are the four ops'.
__global__ void rope_store_kernel(RopeStoreArgs a) {
  extern __shared__ double2 cos_sin[];  // [half] of cos_sin_at
  wait_for_previous();                  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  const int64_t t = blockIdx.x, half = a.half;
  const int32_t position = a.positions[t];
  for (int64_t j = threadIdx.x; j < half; j += blockDim.x) cos_sin[j] = cos_sin_at(position, j, a.inv_freq, a.magnitude);
  __syncthreads();
  const int64_t h0 = blockIdx.y * a.heads_per_block, h1 = min(h0 + a.heads_per_block, a.heads + a.kv_heads);
  for (int64_t i = threadIdx.x; i < (h1 - h0) * half; i += blockDim.x) {
    const int64_t h = h0 + i / half, j = i % half;
    if (h < a.heads) rotate_pair(a.q + t * a.q_s0 + h * a.q_s1, j, half, cos_sin[j], nullptr);
    else rotate_pair(a.k + t * a.k_s0 + (h - a.heads) * a.d, j, half, cos_sin[j], a.cache_k + position * a.ck_s0 + (h - a.heads) * a.d);
  }
  // The block's k heads: their dims past the rotary ones, and their v rows.
  const int64_t k0 = max(h0, a.heads) - a.heads, k1 = h1 - a.heads;
  if (k1 <= k0) return;
  const int64_t rest = a.d - 2 * half, first = k0 * a.d;
  const float* k = a.k + t * a.k_s0;
  float* cache_k = a.cache_k + position * a.ck_s0;
  for (int64_t i = threadIdx.x; i < (k1 - k0) * rest; i += blockDim.x) {
    const int64_t c = first + (i / rest) * a.d + 2 * half + i % rest;
    cache_k[c] = k[c];
  }
  const float* v = a.v + t * a.v_s0;
  float* cache_v = a.cache_v + position * a.cv_s0;
  for (int64_t i = threadIdx.x; i < (k1 - k0) * a.d; i += blockDim.x) cache_v[first + i] = v[first + i];
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
  // Every head in one block for a prompt; for a few tokens, blocks of two heads, so that a decode
  // step's dozens of heads spread over as many multiprocessors.
  const int64_t all_heads = a.heads + a.kv_heads;
  a.heads_per_block = a.n >= 64 ? all_heads : std::min<int64_t>(all_heads, 2);
  const dim3 grid(static_cast<unsigned>(a.n), static_cast<unsigned>((all_heads + a.heads_per_block - 1) / a.heads_per_block));
  launch_early(rope_store_kernel, grid, dim3(256), static_cast<size_t>(a.half) * sizeof(double2), a);
  check_launch("rope_and_store");
}

}  // namespace sanctum::ops::cuda

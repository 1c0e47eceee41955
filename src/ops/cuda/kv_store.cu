// The quantized KV caches' stores on a GPU (ops/kv_format.h): each new row's blocks of 32 values along
// head_dim quantized as the CPU's store (ops/cpu/kv_quantize.cc) quantizes them, to the same bytes.
// q8: the scale is the nearest bf16 at or above amax / 127, each code x / scale rounded half to even
// and clamped to [-127, 127]. q4: the min is the nearest bf16 at or below the block's least value, the
// scale the nearest at or above (max - min) / 15, each code (x - min) / scale rounded half to even and
// clamped to [0, 15], packed two a byte (value i low, i + 16 high). A bf16 cache takes store_rows
// (elementwise.cu), which rounds.
#include "ops/cuda/common.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/kv_access.cuh"

namespace sanctum::ops::cuda {

namespace {

constexpr int kWarps = 8;

struct StoreArgs {
  const float* src;  // (n, heads * d), row stride src_s0
  int64_t src_s0;
  uint8_t* data;  // q8: (rows, heads, d) codes; q4: (rows, heads, blocks * 16) packed codes
  int64_t c_s0, c_s1;
  uint16_t* scales;  // bf16 bits; q8: (rows, heads, blocks); q4: (rows, heads, 2 * blocks) of (scale, min)
  int64_t s_s0, s_s1;
  int64_t n, heads, d, blocks, row0;
  const int32_t* device_row0;  // overrides row0 when set (a recorded decode step)
};

// The bf16 nearest x from above (x >= 0), so that no code computed against it passes the code range.
__device__ __forceinline__ uint16_t bf16_at_least(float x) {
  uint16_t b = bf16_bits(x);
  if (bf16_value(b) < x) b = static_cast<uint16_t>(b & 0x8000u ? b - 1 : b + 1);
  return b;
}
// The bf16 nearest x from below, so that no value of the block lies under the stored min.
__device__ __forceinline__ uint16_t bf16_at_most(float x) {
  uint16_t b = bf16_bits(x);
  if (bf16_value(b) > x) b = static_cast<uint16_t>(b & 0x8000u ? b + 1 : b - 1);
  return b;
}

// The live lanes' least and greatest x as the CPU's scan finds them: of values that compare equal (0 and
// -0) the one in the lowest lane, which its std::min / std::max keep.
__device__ __forceinline__ float first_equal(float x, bool live, float v) {
  const unsigned lanes = __ballot_sync(0xffffffffu, live && x == v);
  return __shfl_sync(0xffffffffu, x, lanes != 0 ? __ffs(static_cast<int>(lanes)) - 1 : 0);
}
__device__ __forceinline__ float least_in_block(float x, bool live) {
  float v = live ? x : INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return first_equal(x, live, v);
}
__device__ __forceinline__ float greatest_in_block(float x, bool live) {
  float v = live ? x : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return first_equal(x, live, v);
}

// A warp per (token, head, block of 32): lane l takes value l of the block (the last block of a
// head_dim off 32 is shorter).
template <KvFormat F>
__global__ void __launch_bounds__(kWarps * 32) store_kernel(StoreArgs a) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  const int64_t w = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (w >= a.n * a.heads * a.blocks) return;  // warp-uniform
  const int64_t blk = w % a.blocks, h = w / a.blocks % a.heads, i = w / a.blocks / a.heads;
  const int64_t c = blk * kQ8Block + lane;
  const bool live = c < a.d;
  const float x = live ? a.src[i * a.src_s0 + h * a.d + c] : 0.0f;
  const int64_t row = (a.device_row0 != nullptr ? *a.device_row0 : a.row0) + i;
  if constexpr (F == KvFormat::q8) {
    const float amax = warp_max(fabsf(x));
    const uint16_t s = bf16_at_least(amax / 127.0f);
    const float sf = bf16_value(s);
    if (live) {
      const float q = sf > 0.0f ? rintf(x / sf) : 0.0f;
      a.data[row * a.c_s0 + h * a.c_s1 + c] = static_cast<uint8_t>(static_cast<int8_t>(fminf(fmaxf(q, -127.0f), 127.0f)));
    }
    if (lane == 0) a.scales[row * a.s_s0 + h * a.s_s1 + blk] = s;
  } else {
    const float lo = least_in_block(x, live), hi = greatest_in_block(x, live);
    const uint16_t m = bf16_at_most(lo);
    const float mf = bf16_value(m);
    const uint16_t s = bf16_at_least((hi - mf) / 15.0f);
    const float sf = bf16_value(s);
    const float q = live && sf > 0.0f ? rintf((x - mf) / sf) : 0.0f;
    const uint32_t code = static_cast<uint32_t>(fminf(fmaxf(q, 0.0f), 15.0f));  // 0 past the head: the CPU's fill
    const uint32_t high = __shfl_down_sync(0xffffffffu, code, 16);              // value lane + 16 of the block
    if (lane < 16) a.data[row * a.c_s0 + h * a.c_s1 + blk * 16 + lane] = static_cast<uint8_t>(code | high << 4);
    if (lane == 0) {
      a.scales[row * a.s_s0 + h * a.s_s1 + 2 * blk] = s;
      a.scales[row * a.s_s0 + h * a.s_s1 + 2 * blk + 1] = m;
    }
  }
}

}  // namespace

void store_kv_rows(const Tensor& src, const KvRows& dst, int64_t row0, const int32_t* device_row0) {
  check(dst.format == KvFormat::q8 || dst.format == KvFormat::q4, ErrorKind::internal,
        "[store_kv_rows] the GPU store quantizes q8 and q4 rows; f32 and bf16 take store_rows");
  StoreArgs a{};
  a.src = src.data<float>();
  a.src_s0 = src.stride(0);
  a.data = static_cast<uint8_t*>(dst.data.raw());
  a.c_s0 = dst.data.stride(0);
  a.c_s1 = dst.data.stride(1);
  a.scales = static_cast<uint16_t*>(dst.scales.raw());
  a.s_s0 = dst.scales.stride(0);
  a.s_s1 = dst.scales.stride(1);
  a.n = src.dim(0);
  a.heads = dst.kv_heads();
  a.d = dst.head_dim;
  a.blocks = (a.d + kQ8Block - 1) / kQ8Block;
  a.row0 = row0;
  a.device_row0 = device_row0;
  const int64_t warps = a.n * a.heads * a.blocks;
  if (warps == 0) return;
  if (dst.format == KvFormat::q8) {
    launch_early(store_kernel<KvFormat::q8>, dim3(blocks_for(warps, kWarps)), dim3(kWarps * 32), 0, a);
    check_launch("store_kv_rows (q8)");
  } else {
    launch_early(store_kernel<KvFormat::q4>, dim3(blocks_for(warps, kWarps)), dim3(kWarps * 32), 0, a);
    check_launch("store_kv_rows (q4)");
  }
}

}  // namespace sanctum::ops::cuda

// The q8 KV cache's store on a GPU (ops/kv_format.h): each new row's blocks of 32 values along
// head_dim quantized as the CPU's store (ops/cpu/kv_quantize.cc) quantizes them, to the same bytes:
// the scale is the nearest bf16 at or above amax / 127, each code x / scale rounded half to even and
// clamped to [-127, 127]. A bf16 cache takes store_rows (elementwise.cu), which rounds.
#include "ops/cuda/common.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/kv_access.cuh"

namespace sanctum::ops::cuda {

namespace {

constexpr int kWarps = 8;

struct Q8StoreArgs {
  const float* src;  // (n, heads * d), row stride src_s0
  int64_t src_s0;
  int8_t* codes;  // (rows, heads, d)
  int64_t c_s0, c_s1;
  uint16_t* scales;  // (rows, heads, blocks) bf16 bits
  int64_t s_s0, s_s1;
  int64_t n, heads, d, blocks, row0;
  const int32_t* device_row0;  // overrides row0 when set (a recorded decode step)
};

// The bf16 nearest x from above (x >= 0), so that no code computed against it passes 127.
__device__ __forceinline__ uint16_t bf16_at_least(float x) {
  uint16_t b = bf16_bits(x);
  if (bf16_value(b) < x) b = static_cast<uint16_t>(b & 0x8000u ? b - 1 : b + 1);
  return b;
}

// A warp per (token, head, block of 32): lane l takes value l of the block.
__global__ void __launch_bounds__(kWarps * 32) store_q8_kernel(Q8StoreArgs a) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  const int64_t w = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (w >= a.n * a.heads * a.blocks) return;  // warp-uniform
  const int64_t blk = w % a.blocks, h = w / a.blocks % a.heads, i = w / a.blocks / a.heads;
  const int64_t c = blk * kQ8Block + lane;
  const bool live = c < a.d;  // the last block of a head_dim off 32 is shorter
  const float x = live ? a.src[i * a.src_s0 + h * a.d + c] : 0.0f;
  const float amax = warp_max(fabsf(x));
  const uint16_t s = bf16_at_least(amax / 127.0f);
  const float sf = bf16_value(s);
  const int64_t row = (a.device_row0 != nullptr ? *a.device_row0 : a.row0) + i;
  if (live) {
    const float q = sf > 0.0f ? rintf(x / sf) : 0.0f;
    a.codes[row * a.c_s0 + h * a.c_s1 + c] = static_cast<int8_t>(fminf(fmaxf(q, -127.0f), 127.0f));
  }
  if (lane == 0) a.scales[row * a.s_s0 + h * a.s_s1 + blk] = s;
}

}  // namespace

void store_kv_rows(const Tensor& src, const KvRows& dst, int64_t row0, const int32_t* device_row0) {
  check(dst.format == KvFormat::q8, ErrorKind::internal, "[store_kv_rows] the GPU store quantizes q8 rows; f32 and bf16 take store_rows");
  Q8StoreArgs a{};
  a.src = src.data<float>();
  a.src_s0 = src.stride(0);
  a.codes = static_cast<int8_t*>(dst.data.raw());
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
  launch_early(store_q8_kernel, dim3(blocks_for(warps, kWarps)), dim3(kWarps * 32), 0, a);
  check_launch("store_kv_rows (q8)");
}

}  // namespace sanctum::ops::cuda

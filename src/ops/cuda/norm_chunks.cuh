#pragma once
// The chunked RMSNorm's arithmetic on 16-byte chunks of a row (four values each), shared by
// rms_norm_chunks_kernel (norms.cu) and the head norms of norm_rope_store_kernel (rope.cu), so that
// the two give the same bits by construction.
#include "ops/cuda/common.cuh"

namespace sanctum::ops::cuda::norm_chunks {

// The norm's weights plus the storage offset for columns c .. c + 3, or zeros from cols on.
__device__ __forceinline__ float4 weights(const void* w, FloatKind kind, float offset, int64_t c, int64_t cols) {
  return c < cols ? make_float4(load_float(w, kind, c) + offset, load_float(w, kind, c + 1) + offset, load_float(w, kind, c + 2) + offset,
                                load_float(w, kind, c + 3) + offset)
                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// ss plus the squares of v's values, in order.
__device__ __forceinline__ float add_squares(float ss, float4 v) {
  ss += v.x * v.x;
  ss += v.y * v.y;
  ss += v.z * v.z;
  ss += v.w * v.w;
  return ss;
}

// 1 / rms of a row of `cols` values whose squares sum to ss.
__device__ __forceinline__ float inverse_rms(float ss, int64_t cols, float eps) { return rsqrtf(ss / static_cast<float>(cols) + eps); }

// v normalised: each value times inv times its weight.
__device__ __forceinline__ float4 normalised(float4 v, float inv, float4 w) {
  return make_float4(v.x * inv * w.x, v.y * inv * w.y, v.z * inv * w.z, v.w * inv * w.w);
}

}  // namespace sanctum::ops::cuda::norm_chunks

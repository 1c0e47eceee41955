#pragma once
// Shared pieces of the CUDA kernels: 2-D row views of tensors, float loads of f32/bf16/f16 data, warp
// and block reductions, and the launch check.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "base/error.h"
#include "tensor/cuda/stream.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops::cuda {

using sanctum::cuda::check_cuda;
using sanctum::cuda::stream;

// A tensor seen as `rows` rows of `cols` elements, row r at data + r * stride (elements).
template <class T>
struct Rows {
  T* data = nullptr;
  int64_t rows = 0, cols = 0, stride = 0;
};

// Views t (any rank >= 1, contiguous last dim) as rows; the leading dims must collapse into one
// uniform stride, which holds for every view the models make.
template <class T>
Rows<T> rows_of(const Tensor& t, const char* op) {
  Rows<T> r;
  r.data = t.data<T>();
  r.cols = t.dim(-1);
  r.rows = r.cols > 0 ? t.numel() / r.cols : 0;
  r.stride = t.ndim() >= 2 ? t.stride(t.ndim() - 2) : r.cols;
  int64_t expect = t.ndim() >= 2 ? t.stride(t.ndim() - 2) * t.dim(t.ndim() - 2) : 0;
  for (int i = t.ndim() - 3; i >= 0; --i) {
    if (t.dim(i) != 1 && t.stride(i) != expect)
      fail(ErrorKind::unsupported, std::string("[") + op + "] cuda needs rows of one stride, got " + t.shape_string());
    expect = t.stride(i) * t.dim(i);
  }
  return r;
}

// The element type tag of a float tensor, for kernels that read weights of any float dtype.
enum class FloatKind : int { f32 = 0, bf16 = 1, f16 = 2 };
inline FloatKind float_kind(const Tensor& t) {
  return t.dtype() == DType::bf16 ? FloatKind::bf16 : t.dtype() == DType::f16 ? FloatKind::f16 : FloatKind::f32;
}

__device__ __forceinline__ float load_float(const void* p, FloatKind kind, int64_t i) {
  switch (kind) {
    case FloatKind::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case FloatKind::f16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// A float or bf16 value as f32, and an f32 value as T (float, or bf16 rounded to nearest even).
template <class T>
__device__ __forceinline__ float to_float(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return __bfloat162float(v);
}
template <class T>
__device__ __forceinline__ T float_as(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return __float2bfloat16(v);
}

// Four consecutive values of f32 or bf16 memory (16- or 8-byte aligned) as floats, and back (bf16:
// rounded to nearest even).
template <class T>
__device__ __forceinline__ float4 load4(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return *reinterpret_cast<const float4*>(p);
  } else {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  }
}
template <class T>
__device__ __forceinline__ void store4(T* p, float4 v) {
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float4*>(p) = v;
  } else {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    *reinterpret_cast<uint2*>(p) = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
}

// Any weight as the general kernels read it (generic mat-vecs, dequantization, embeddings): MLX
// affine codes with their scales and biases, or a dense f32/bf16/f16 matrix.
struct WeightView {
  const void* dense = nullptr;  // dense weights
  FloatKind dense_kind = FloatKind::f32;
  int64_t stride = 0;               // row stride of data, in elements (u32 words when quantized)
  const uint32_t* codes = nullptr;  // quantized weights
  int bits = 0;
  const void* scales = nullptr;
  const void* biases = nullptr;
  FloatKind scale_kind = FloatKind::f32;
  int64_t scale_stride = 0;
  int group = 1;
  bool tiles = false;  // WeightLayout::tiles (matvec_tiles.cuh)
};

inline WeightView weight_view(const Weight& w) {
  WeightView v;
  v.stride = w.data.stride(0);
  if (w.quantized()) {
    v.codes = w.data.data<uint32_t>();
    v.bits = w.quant.bits;
    v.scales = w.scales.raw();
    v.biases = w.biases.raw();
    v.scale_kind = float_kind(w.scales);
    v.scale_stride = w.scales.stride(0);
    v.group = w.quant.group_size;
    v.tiles = w.layout == WeightLayout::tiles;
  } else {
    v.dense = w.data.raw();
    v.dense_kind = float_kind(w.data);
  }
  return v;
}

// Element (row, c): scale * code + bias, or the dense value.
__device__ __forceinline__ float weight_at(const WeightView& w, int64_t row, int64_t c) {
  if (w.codes == nullptr) return load_float(w.dense, w.dense_kind, row * w.stride + c);
  if (w.tiles) {  // 4-bit: word 4 l + 2 h + (c % 16) / 8 of tile (row / 16, c / 64) for row g + 8 h, lane l = 4 g + (c % 64) / 16
    const int64_t rt = row >> 4, kt = c >> 6;
    const int r = static_cast<int>(row & 15), cc = static_cast<int>(c & 63), lane = ((r & 7) << 2) | (cc >> 4);
    const int64_t word = ((rt * (w.stride >> 3) + kt) * 32 + lane) * 4 + (r >> 3) * 2 + ((cc & 15) >> 3);
    const uint32_t code = (w.codes[word] >> ((cc & 7) * 4)) & 15u;
    const int64_t s = (rt * w.scale_stride + c / w.group) * 16 + (r & 7) * 2 + (r >> 3);
    return load_float(w.scales, w.scale_kind, s) * static_cast<float>(code) + load_float(w.biases, w.scale_kind, s);
  }
  const int per = 32 / w.bits;
  const uint32_t code = (w.codes[row * w.stride + c / per] >> ((c % per) * w.bits)) & ((1u << w.bits) - 1u);
  const int64_t g = row * w.scale_stride + c / w.group;
  return load_float(w.scales, w.scale_kind, g) * static_cast<float>(code) + load_float(w.biases, w.scale_kind, g);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of up to 1024 threads; every thread gets the result. `scratch` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(total);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(m);
}

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Checks the last launch (configuration errors surface here; faults surface at the next sync).
inline void check_launch(const char* op) { check_cuda(cudaGetLastError(), op); }

inline int multiprocessor_count() {
  static const int count = [] {
    int device = 0, n = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), "multiprocessor count");
    return n;
  }();
  return count;
}

// 16-byte vector loads need it.
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// A scale or bias element (f32, bf16 or f16, a kernel template's S) as f32.
template <class S>
__device__ __forceinline__ float to_f(S v);
template <>
__device__ __forceinline__ float to_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_f<__half>(__half v) {
  return __half2float(v);
}

inline unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

// Programmatic dependent launch (sm_90). A kernel started with launch_early() may begin while the
// kernel before it in the stream still runs, once that kernel's blocks have all called
// allow_next_early() (or ended): it may read only data no kernel of the step writes (weights) until
// it calls wait_for_previous(), which returns when the kernel before has finished and its writes
// are visible. allow_next_early() is harmless before a kernel launched the ordinary way. Both are
// no-ops before sm_90.
__device__ __forceinline__ void wait_for_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_next_early() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether kernels that support it start early (tuning early_launch=0: never, for comparisons).
bool early_launch_enabled();

template <class... KernelArgs, class... Args>
void launch_early(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream();
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = early_launch_enabled() ? 1 : 0;
  config.attrs = &attribute;
  config.numAttrs = 1;
  check_cuda(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), "launch");
}

}  // namespace sanctum::ops::cuda

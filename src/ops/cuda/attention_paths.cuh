#pragma once
// The arguments of ops::attention as the CUDA attention paths see them, and the paths besides the
// flash kernel of attention.cu, which picks one per call.
#include <cuda_bf16.h>

#include <cstdint>
#include <span>

#include "ops/cuda/kv_elem.cuh"
#include "tensor/tensor.h"

namespace sanctum::ops::cuda {

struct AttnView {
  const float* q;
  int64_t q_s0, q_s1;
  KvSide k, v;  // (key rows, kv heads, d) in the cache's stored elements
  // Of k and of v: f32, bf16 or q8 alike, or q8 keys with q4 values (--kv-cache-dtype q4v).
  KvElem k_elem = KvElem::f32, v_elem = KvElem::f32;
  float* out;
  int64_t o_s0, o_s1;
  int64_t n, q_pos0, heads, kv_heads;
  const int32_t* q_pos0_device;  // when set, the kernels read q_pos0 here (a recorded decode step)
  int64_t key_rows;              // rows of k and v, which the decode kernel's launch is sized by
  int d;
  float scale;
  __nv_bfloat16* out16 = nullptr;  // out in bf16 instead (attention_flash_wgmma only; out is then null)
  // Where set (attention_decode only): out receives out / (1 + exp(-gate)), sigmoid_mul's expression.
  const float* gate = nullptr;
  int64_t g_s0 = 0, g_s1 = 0;
};

// A result on its way out: gated as sigmoid_mul gates it, where the view has a gate.
__device__ __forceinline__ float gated_out(const AttnView& a, int64_t i, int64_t h, int c, float value) {
  return a.gate == nullptr ? value : value / (1.0f + expf(-a.gate[i * a.g_s0 + h * a.g_s1 + c]));
}

// The view of ops::attention's tensors: q and out (n, heads, d) with out f32 or bf16 (out16), k and v
// a cache's sides (key rows, kv heads, d) in a pair of elements the view names.
inline AttnView attn_view(const Tensor& q, const KvRows& k, const KvRows& v, int64_t q_pos0, const int32_t* device_q_pos0, float scale,
                          Tensor& out) {
  const bool bf16 = out.dtype() == DType::bf16;
  AttnView a{};
  a.q = q.data<float>();
  a.q_s0 = q.stride(0);
  a.q_s1 = q.stride(1);
  a.k = kv_side(k);
  a.v = kv_side(v);
  a.k_elem = kv_elem(k.format);
  a.v_elem = kv_elem(v.format);
  a.out = bf16 ? nullptr : out.data<float>();
  a.o_s0 = out.stride(0);
  a.o_s1 = out.stride(1);
  a.n = q.dim(0);
  a.q_pos0 = q_pos0;
  a.heads = q.dim(1);
  a.kv_heads = k.kv_heads();
  a.q_pos0_device = device_q_pos0;
  a.key_rows = k.rows();
  a.d = static_cast<int>(q.dim(2));
  a.scale = scale;
  a.out16 = bf16 ? static_cast<__nv_bfloat16*>(out.raw()) : nullptr;
  return a;
}

// The same over f32 k and v tensors (key rows, kv heads, d).
inline AttnView attn_view(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, const int32_t* device_q_pos0, float scale,
                          Tensor& out) {
  return attn_view(q, KvRows{k, Tensor{}, KvFormat::f32, k.dim(2)}, KvRows{v, Tensor{}, KvFormat::f32, v.dim(2)}, q_pos0, device_q_pos0,
                   scale, out);
}

// Up to this many queries go to the decode kernel.
constexpr int64_t kDecodeMaxQueries = 8;

// Few queries (decode, short speculative batches): every query head of one KV head at once, keys
// split across warps and blocks, K/V read once per (KV head, row group) straight from global.
void attention_decode(const AttnView& a);
// The same for several calls in as few launches as their instantiations allow (one for a decode
// step's sequences), each call's bits those of its own attention_decode.
void attention_decode_batch(std::span<const AttnView> views);

// Long prefill in the fast precision mode, flash-attention style on the tensor cores (bf16 Q, K, V
// and P, f32 sums and softmax; attention_flash_bf16.cu): head dims 64, 128 and 256, rows of whole
// 16-byte vectors, the position on the host. A bf16 cache is read in place; f32, q8 and q4 sides are
// rounded (dequantized) once per call into bf16 head-major scratch.
bool attention_flash_bf16_ok(const AttnView& a);
void attention_flash_bf16(const AttnView& a);
// dst[head][row][c] = bf16(src[row * s0 + head * s1 + c]): rows of d (a multiple of 4) floats rounded
// once for the flash kernels; returns dst.
__nv_bfloat16* bf16_head_major(const float* src, int64_t s0, int64_t s1, int64_t rows, int64_t heads, int d, __nv_bfloat16* dst);
// The same for rows [0, rows) of a cache side in element `e` (any d): values rounded or dequantized
// once; returns dst.
__nv_bfloat16* kv_bf16_head_major(const KvSide& src, KvElem e, int64_t rows, int64_t heads, int d, __nv_bfloat16* dst);

// The same long prefill on Hopper's warpgroup MMA (attention_flash_wgmma.cu), where it runs: head dim
// 128, the flash kernel's inputs, an sm_90 GPU with sm_90a code (tuning flash_wgmma=0: never). It
// also writes out16 where that is set.
bool attention_flash_wgmma_ok(const AttnView& a);
bool attention_flash_wgmma_present();  // the GPU and build run it (head dim and inputs aside)
void attention_flash_wgmma(const AttnView& a);

// Long prefill in the fast precision mode for the other head dims: per KV head and query block,
// S = scale * Q K^T and O = P V on cuBLAS (f32 accumulation) with a causal softmax kernel between
// them. An f32 cache multiplies in TF32; a bf16 cache is read in place by bf16 GEMMs (Q and P rounded
// to bf16, as the flash kernels round them), a q8 or q4v one dequantized to bf16 scratch first.
void attention_gemm(const AttnView& a);

}  // namespace sanctum::ops::cuda

// Long-prefill attention on the tensor cores (fast precision mode only). Per query block and KV head,
// the group's query heads form one strided batch (K and V shared by stride 0):
//   S_h = scale * Q_h K^T   (f32 accumulation), causal softmax of each row in f32,
//   O_h = P_h V             written straight into out with its strides.
// An f32 cache multiplies in TF32. A bf16 cache is multiplied where it lies by bf16 GEMMs, with Q
// rounded to bf16 once per call and P written in bf16 by the softmax (the flash kernels' roundings);
// a q8 or q4v cache is first dequantized to bf16 rows in scratch.
// Query blocks are sized so one block's S (group heads × rows × keys) stays near L2 size, which
// also bounds the scratch and skips most of the masked upper triangle (a block only multiplies the
// keys its last query sees).
#include <algorithm>

#include "ops/cuda/attention_paths.cuh"
#include "ops/cuda/blas.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/kv_access.cuh"

namespace sanctum::ops::cuda {

namespace {

// Row r (blockIdx.x) of head-in-group blockIdx.y: keys [0, first_limit + r) are visible; the rest
// of the row up to `ld` becomes 0 so the P V product may read whole rows. P goes to p (row stride
// p_ld) in P's element: in place for f32, to bf16 bits beside S otherwise.
template <class P>
__global__ void causal_softmax_rows(float* s, int64_t ld, int64_t rows, int64_t first_limit, P* p, int64_t p_ld) {
  __shared__ float scratch[32];
  const int64_t at = static_cast<int64_t>(blockIdx.y) * rows + blockIdx.x;
  float* row = s + at * ld;
  P* out = p + at * p_ld;
  const int64_t limit = first_limit + blockIdx.x;
  float m = -INFINITY, l = 0.0f;  // this thread's running max and sum of exp(x - m)
  for (int64_t c = threadIdx.x; c < limit; c += blockDim.x) {
    const float x = row[c];
    if (x > m) {
      l = l * expf(m - x) + 1.0f;  // expf(-inf) = 0 on the first element
      m = x;
    } else {
      l += expf(x - m);
    }
  }
  const float M = block_max(m, scratch);
  const float L = block_sum(m == -INFINITY ? 0.0f : l * expf(m - M), scratch);
  const float inv = 1.0f / L;
  for (int64_t c = threadIdx.x; c < p_ld; c += blockDim.x) out[c] = kv_stored<P>(c < limit ? expf(row[c] - M) * inv : 0.0f);
}

Tensor& s_scratch() {
  static Tensor t;
  return t;
}
Tensor& p_scratch() {
  static Tensor t;
  return t;
}
Tensor& q_scratch() {
  static Tensor t;
  return t;
}
Tensor& kv_scratch() {
  static Tensor t;
  return t;
}

// A bf16, q8 or q4v cache: bf16 GEMMs over K and V in place (q8 and q4: dequantized into scratch
// first), Q and P in bf16, S and O in f32.
void attention_gemm_bf16(const AttnView& a) {
  const int64_t G = a.heads / a.kv_heads, keys_all = a.q_pos0 + a.n;
  const int64_t ld_all = (keys_all + 7) / 8 * 8;  // 16-byte rows of P for the GEMMs
  constexpr int64_t kTargetBytes = int64_t{32} << 20;
  int64_t qb = kTargetBytes / (G * ld_all * 4) / 16 * 16;
  qb = std::min<int64_t>(std::max<int64_t>(qb, 16), 512);
  qb = std::min(qb, a.n);
  float* s = static_cast<float*>(scratch_bytes(s_scratch(), static_cast<size_t>(G * qb * ld_all) * sizeof(float)));
  auto* p = static_cast<uint16_t*>(scratch_bytes(p_scratch(), static_cast<size_t>(G * qb * ld_all) * 2));
  // Q as [head][row][d] bf16: query block i0 of head h at q16 + (h * n + i0) * d.
  auto* q16 = static_cast<__nv_bfloat16*>(scratch_bytes(q_scratch(), static_cast<size_t>(a.n * a.heads * a.d) * 2));
  kv_bf16_head_major(KvSide{a.q, a.q_s0, a.q_s1}, KvElem::f32, a.n, a.heads, a.d, q16);
  // K and V as bf16 rows: row t of KV head g at base + t * s0 + g * s1.
  const void *k = a.k.data, *v = a.v.data;
  int64_t k_s0 = a.k.s0, k_s1 = a.k.s1, v_s0 = a.v.s0, v_s1 = a.v.s1;
  if (a.k_elem != KvElem::bf16 || a.v_elem != KvElem::bf16) {  // the pairs a cache holds: both bf16 or neither
    const int64_t elems = keys_all * a.kv_heads * a.d;
    auto* kv16 = static_cast<__nv_bfloat16*>(scratch_bytes(kv_scratch(), static_cast<size_t>(2 * elems) * 2));
    k = kv_bf16_head_major(a.k, a.k_elem, keys_all, a.kv_heads, a.d, kv16);
    v = kv_bf16_head_major(a.v, a.v_elem, keys_all, a.kv_heads, a.d, kv16 + elems);
    k_s0 = v_s0 = a.d;
    k_s1 = v_s1 = keys_all * a.d;
  }
  cublasHandle_t handle = blas_handle();
  const float zero = 0.0f, one = 1.0f;
  for (int64_t i0 = 0; i0 < a.n; i0 += qb) {
    const int64_t rows = std::min(qb, a.n - i0), keys = a.q_pos0 + i0 + rows, ld = (keys + 7) / 8 * 8;
    for (int64_t g = 0; g < a.kv_heads; ++g) {
      // Column-major view: S_h^T (keys × rows, ld) = K_g^T (op T of D × keys, ld k_s0) · Q_h (D × rows, ld D).
      check_blas(blas_gemm_strided_batched_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(keys), static_cast<int>(rows), a.d,
                                              &a.scale, static_cast<const __nv_bfloat16*>(k) + g * k_s1, CUDA_R_16BF,
                                              static_cast<int>(k_s0), 0, q16 + (g * G * a.n + i0) * a.d, CUDA_R_16BF, a.d, a.n * a.d, &zero,
                                              s, CUDA_R_32F, static_cast<int>(ld), rows * ld, static_cast<int>(G), CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT),
                 "attention S = Q K^T (bf16)");
      causal_softmax_rows<<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(G)), 256, 0, stream()>>>(s, ld, rows, a.q_pos0 + i0 + 1,
                                                                                                             p, ld);
      check_launch("attention causal softmax");
      // Column-major view: O_h^T (D × rows, ld o_s0) = V_g (D × keys, ld v_s0) · P_h^T (keys × rows, ld).
      check_blas(blas_gemm_strided_batched_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, a.d, static_cast<int>(rows), static_cast<int>(keys), &one,
                                              static_cast<const __nv_bfloat16*>(v) + g * v_s1, CUDA_R_16BF, static_cast<int>(v_s0), 0, p,
                                              CUDA_R_16BF, static_cast<int>(ld), rows * ld, &zero, a.out + i0 * a.o_s0 + g * G * a.o_s1,
                                              CUDA_R_32F, static_cast<int>(a.o_s0), a.o_s1, static_cast<int>(G), CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT),
                 "attention O = P V (bf16)");
    }
  }
}

}  // namespace

void attention_gemm(const AttnView& a) {
  if (a.k_elem != KvElem::f32) return attention_gemm_bf16(a);
  const float* k = static_cast<const float*>(a.k.data);
  const float* v = static_cast<const float*>(a.v.data);
  const int64_t G = a.heads / a.kv_heads, keys_all = a.q_pos0 + a.n;
  const int64_t ld_all = (keys_all + 3) / 4 * 4;  // 16-byte rows for the GEMMs
  // About 32 MB of S per block (an H200 has 60 MB of L2), 16..512 query rows.
  constexpr int64_t kTargetBytes = int64_t{32} << 20;
  int64_t qb = kTargetBytes / (G * ld_all * 4) / 16 * 16;
  qb = std::min<int64_t>(std::max<int64_t>(qb, 16), 512);
  qb = std::min(qb, a.n);
  float* s = static_cast<float*>(scratch_bytes(s_scratch(), static_cast<size_t>(G * qb * ld_all) * sizeof(float)));
  cublasHandle_t handle = blas_handle();
  const float zero = 0.0f, one = 1.0f;
  for (int64_t i0 = 0; i0 < a.n; i0 += qb) {
    const int64_t rows = std::min(qb, a.n - i0), keys = a.q_pos0 + i0 + rows, ld = (keys + 3) / 4 * 4;
    for (int64_t g = 0; g < a.kv_heads; ++g) {
      // Column-major view: S_h^T (keys × rows, ld) = K_g^T(op T of D × keys, ld k_s0) · Q_h (D × rows, ld q_s0).
      check_blas(blas_gemm_strided_batched_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(keys), static_cast<int>(rows), a.d,
                                              &a.scale, k + g * a.k.s1, CUDA_R_32F, static_cast<int>(a.k.s0), 0,
                                              a.q + i0 * a.q_s0 + g * G * a.q_s1, CUDA_R_32F, static_cast<int>(a.q_s0), a.q_s1, &zero, s,
                                              CUDA_R_32F, static_cast<int>(ld), rows * ld, static_cast<int>(G),
                                              CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
                 "attention S = Q K^T");
      causal_softmax_rows<<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(G)), 256, 0, stream()>>>(s, ld, rows, a.q_pos0 + i0 + 1,
                                                                                                             s, ld);
      check_launch("attention causal softmax");
      // Column-major view: O_h^T (D × rows, ld o_s0) = V_g (D × keys, ld v_s0) · P_h^T (keys × rows, ld).
      check_blas(blas_gemm_strided_batched_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, a.d, static_cast<int>(rows), static_cast<int>(keys), &one,
                                              v + g * a.v.s1, CUDA_R_32F, static_cast<int>(a.v.s0), 0, s, CUDA_R_32F, static_cast<int>(ld),
                                              rows * ld, &zero, a.out + i0 * a.o_s0 + g * G * a.o_s1, CUDA_R_32F, static_cast<int>(a.o_s0),
                                              a.o_s1, static_cast<int>(G), CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
                 "attention O = P V");
    }
  }
}

}  // namespace sanctum::ops::cuda

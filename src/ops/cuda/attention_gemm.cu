// Long-prefill attention on the tensor cores (fast precision mode only). Per query block and KV head,
// the group's query heads form one strided batch (K and V shared by stride 0):
//   S_h = scale * Q_h K^T   (TF32 inputs, f32 accumulation), causal softmax of each row in f32,
//   O_h = P_h V             written straight into out with its strides.
// Query blocks are sized so one block's S (group heads × rows × keys) stays near L2 size, which
// also bounds the scratch and skips most of the masked upper triangle (a block only multiplies the
// keys its last query sees).
#include <algorithm>

#include "ops/cuda/attention_paths.cuh"
#include "ops/cuda/blas.cuh"
#include "ops/cuda/common.cuh"

namespace sanctum::ops::cuda {

namespace {

// Row r (blockIdx.x) of head-in-group blockIdx.y: keys [0, first_limit + r) are visible; the rest
// of the row up to `ld` becomes 0 so the P V product may read whole rows.
__global__ void causal_softmax_rows(float* s, int64_t ld, int64_t rows, int64_t first_limit) {
  __shared__ float scratch[32];
  float* row = s + (static_cast<int64_t>(blockIdx.y) * rows + blockIdx.x) * ld;
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
  for (int64_t c = threadIdx.x; c < ld; c += blockDim.x) row[c] = c < limit ? expf(row[c] - M) * inv : 0.0f;
}

Tensor& s_scratch() {
  static Tensor t;
  return t;
}

}  // namespace

void attention_gemm(const AttnView& a) {
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
                                              &a.scale, a.k + g * a.k_s1, CUDA_R_32F, static_cast<int>(a.k_s0), 0,
                                              a.q + i0 * a.q_s0 + g * G * a.q_s1, CUDA_R_32F, static_cast<int>(a.q_s0), a.q_s1, &zero, s,
                                              CUDA_R_32F, static_cast<int>(ld), rows * ld, static_cast<int>(G),
                                              CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
                 "attention S = Q K^T");
      causal_softmax_rows<<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(G)), 256, 0, stream()>>>(s, ld, rows,
                                                                                                             a.q_pos0 + i0 + 1);
      check_launch("attention causal softmax");
      // Column-major view: O_h^T (D × rows, ld o_s0) = V_g (D × keys, ld v_s0) · P_h^T (keys × rows, ld).
      check_blas(blas_gemm_strided_batched_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, a.d, static_cast<int>(rows), static_cast<int>(keys), &one,
                                              a.v + g * a.v_s1, CUDA_R_32F, static_cast<int>(a.v_s0), 0, s, CUDA_R_32F,
                                              static_cast<int>(ld), rows * ld, &zero, a.out + i0 * a.o_s0 + g * G * a.o_s1, CUDA_R_32F,
                                              static_cast<int>(a.o_s0), a.o_s1, static_cast<int>(G), CUBLAS_COMPUTE_32F_FAST_TF32,
                                              CUBLAS_GEMM_DEFAULT),
                 "attention O = P V");
    }
  }
}

}  // namespace sanctum::ops::cuda

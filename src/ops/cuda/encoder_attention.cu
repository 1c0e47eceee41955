// The vision encoder's matmuls and attention on cuBLAS.
//   encoder_matmul: y = x · wᵀ as one f32 GEMM (no TF32: the f32 precision mode's sums stay f32),
//     the weight read in place when it is dense f32, else expanded to an f32 copy first.
//   full_attention: per query block and KV head, the group's query heads as one strided batch (K and
//     V shared by stride 0): S_h = scale · Q_h Kᵀ, a softmax of each whole row (every key is visible),
//     O_h = P_h V written into out with its strides. f32 products in the f32 precision mode, TF32
//     inputs with f32 sums otherwise.
#include <algorithm>

#include "ops/cuda/blas.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/kernels.h"
#include "ops/precision.h"

namespace sanctum::ops::cuda {

namespace {

// Element per thread: (rows, cols) of w as dense f32, row-major.
__global__ void weight_to_f32(WeightView w, int64_t rows, int64_t cols, float* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= rows * cols) return;
  out[i] = weight_at(w, i / cols, i % cols);
}

// Row blockIdx.x of head-in-group blockIdx.y: softmax over all `keys` values, in place.
__global__ void softmax_rows(float* s, int64_t ld, int64_t rows, int64_t keys) {
  __shared__ float scratch[32];
  float* row = s + (static_cast<int64_t>(blockIdx.y) * rows + blockIdx.x) * ld;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < keys; c += blockDim.x) m = fmaxf(m, row[c]);
  const float M = block_max(m, scratch);
  float l = 0.0f;
  for (int64_t c = threadIdx.x; c < keys; c += blockDim.x) l += expf(row[c] - M);
  const float inv = 1.0f / block_sum(l, scratch);
  for (int64_t c = threadIdx.x; c < keys; c += blockDim.x) row[c] = expf(row[c] - M) * inv;
}

Tensor& weight_f32_scratch() {
  static Tensor t;
  return t;
}
Tensor& scores_scratch() {
  static Tensor t;
  return t;
}

cublasComputeType_t product_type() {
  return matmul_precision() == MatmulPrecision::f32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
}

int as_int(int64_t v, const char* what) {
  check(v >= 0 && v <= 0x7fffffff, ErrorKind::unsupported,
        std::string("[encoder] ") + what + " past 2^31 - 1 for cuBLAS: encode fewer images at once");
  return static_cast<int>(v);
}

}  // namespace

void encoder_matmul_f32(const Tensor& x, const Weight& w, Tensor& y) {
  const int64_t n = x.dim(0), m = w.rows, k = w.cols;
  if (n == 0 || m == 0) return;
  const float* wp;
  int64_t ld = k;
  if (!w.quantized() && w.layout == WeightLayout::rows && w.data.dtype() == DType::f32) {
    wp = w.data.data<float>();
    ld = w.data.stride(0);
  } else {
    auto* buf = static_cast<float*>(scratch_bytes(weight_f32_scratch(), static_cast<size_t>(m * k) * sizeof(float)));
    constexpr int kThreads = 256;
    weight_to_f32<<<blocks_for(m * k, kThreads), kThreads, 0, stream()>>>(weight_view(w), m, k, buf);
    check_launch("encoder_matmul weight to f32");
    wp = buf;
  }
  const float one = 1.0f, zero = 0.0f;
  // Column-major view: yᵀ (m × n, ld y_s0) = w (op T of k × m, ld) · xᵀ (k × n, ld x_s0).
  check_blas(blas_gemm_ex(blas_handle(), CUBLAS_OP_T, CUBLAS_OP_N, as_int(m, "weight rows"), as_int(n, "rows"), as_int(k, "weight cols"),
                          &one, wp, CUDA_R_32F, as_int(ld, "weight stride"), x.data<float>(), CUDA_R_32F, as_int(x.stride(0), "x stride"),
                          &zero, y.data<float>(), CUDA_R_32F, as_int(y.stride(0), "y stride"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "encoder_matmul");
}

void full_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out) {
  const int64_t n = q.dim(0), heads = q.dim(1), d = q.dim(2), keys = k.dim(0), kv_heads = k.dim(1), G = heads / kv_heads;
  const int64_t ld = (keys + 3) / 4 * 4;  // 16-byte rows of S
  // About 64 MB of S per query block: 16 rows at least, all of them at most.
  constexpr int64_t kTargetBytes = int64_t{64} << 20;
  const int64_t qb = std::min(n, std::max<int64_t>(16, kTargetBytes / (G * ld * 4) / 16 * 16));
  float* s = static_cast<float*>(scratch_bytes(scores_scratch(), static_cast<size_t>(G * qb * ld) * sizeof(float)));
  cublasHandle_t handle = blas_handle();
  const cublasComputeType_t compute = product_type();
  const float zero = 0.0f, one = 1.0f;
  const float* qp = q.data<float>();
  const float* kp = k.data<float>();
  const float* vp = v.data<float>();
  float* op = out.data<float>();
  for (int64_t i0 = 0; i0 < n; i0 += qb) {
    const int64_t rows = std::min(qb, n - i0);
    for (int64_t g = 0; g < kv_heads; ++g) {
      // Column-major view: S_hᵀ (keys × rows, ld) = K_g (op T of d × keys, ld k_s0) · Q_h (d × rows, ld q_s0).
      check_blas(blas_gemm_strided_batched_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, as_int(keys, "keys"), as_int(rows, "rows"),
                                              as_int(d, "head_dim"), &scale, kp + g * k.stride(1), CUDA_R_32F,
                                              as_int(k.stride(0), "k stride"), 0, qp + i0 * q.stride(0) + g * G * q.stride(1), CUDA_R_32F,
                                              as_int(q.stride(0), "q stride"), q.stride(1), &zero, s, CUDA_R_32F, as_int(ld, "keys"),
                                              rows * ld, as_int(G, "group"), compute, CUBLAS_GEMM_DEFAULT),
                 "full_attention S = Q K^T");
      softmax_rows<<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(G)), 256, 0, stream()>>>(s, ld, rows, keys);
      check_launch("full_attention softmax");
      // Column-major view: O_hᵀ (d × rows, ld o_s0) = V_g (d × keys, ld v_s0) · P_hᵀ (keys × rows, ld).
      check_blas(blas_gemm_strided_batched_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, as_int(d, "head_dim"), as_int(rows, "rows"),
                                              as_int(keys, "keys"), &one, vp + g * v.stride(1), CUDA_R_32F, as_int(v.stride(0), "v stride"),
                                              0, s, CUDA_R_32F, as_int(ld, "keys"), rows * ld, &zero,
                                              op + i0 * out.stride(0) + g * G * out.stride(1), CUDA_R_32F,
                                              as_int(out.stride(0), "out stride"), out.stride(1), as_int(G, "group"), compute,
                                              CUBLAS_GEMM_DEFAULT),
                 "full_attention O = P V");
    }
  }
}

}  // namespace sanctum::ops::cuda

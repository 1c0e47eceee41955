// Row-wise and elementwise kernels: add, add_bias, copy, store_rows, silu_mul, sigmoid_mul, softmax.
#include "ops/cuda/common.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/kv_access.cuh"

namespace sanctum::ops::cuda {

namespace {

constexpr int kThreads = 256;

// One grid-stride loop over rows × cols of up to three row views.
template <class F>
__global__ void rows_kernel(int64_t rows, int64_t cols, F f) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    f(i / cols, i % cols);
}

template <class F>
void launch_rows(int64_t rows, int64_t cols, F f, const char* op) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 132 * 16));
  launch_early(rows_kernel<F>, dim3(blocks), dim3(kThreads), 0, rows, cols, f);
  check_launch(op);
}

// out = silu(gate) * up in f32 whatever the element types: gate and up f32 or bf16 (a GEMM's rounded
// output), out f32 or bf16 (the next matmul's input, rounded here instead of by a pass of its own).
template <class In, class Out>
void silu_mul_as(const Tensor& gate, const Tensor& up, Tensor& out) {
  const auto rg = rows_of<const In>(gate, "silu_mul"), ru = rows_of<const In>(up, "silu_mul");
  const auto ro = rows_of<Out>(out, "silu_mul");
  auto aligned4 = [](const void* p, size_t elem) { return reinterpret_cast<uintptr_t>(p) % (4 * elem) == 0; };
  if (rg.cols % 4 == 0 && rg.stride % 4 == 0 && ru.stride % 4 == 0 && ro.stride % 4 == 0 && aligned4(rg.data, sizeof(In)) &&
      aligned4(ru.data, sizeof(In)) && aligned4(ro.data, sizeof(Out))) {
    launch_rows(
        rg.rows, rg.cols / 4,
        [=] __device__(int64_t r, int64_t c4) {
          const float4 g = load4(rg.data + r * rg.stride + 4 * c4), u = load4(ru.data + r * ru.stride + 4 * c4);
          store4(ro.data + r * ro.stride + 4 * c4, make_float4(silu(g.x) * u.x, silu(g.y) * u.y, silu(g.z) * u.z, silu(g.w) * u.w));
        },
        "silu_mul");
    return;
  }
  launch_rows(
      rg.rows, rg.cols,
      [=] __device__(int64_t r, int64_t c) {
        const float g = to_float(rg.data[r * rg.stride + c]), u = to_float(ru.data[r * ru.stride + c]);
        ro.data[r * ro.stride + c] = float_as<Out>(silu(g) * u);
      },
      "silu_mul");
}

__global__ void softmax_kernel(Rows<float> x) {
  __shared__ float scratch[32];
  float* row = x.data + blockIdx.x * x.stride;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < x.cols; j += blockDim.x) m = fmaxf(m, row[j]);
  m = block_max(m, scratch);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < x.cols; j += blockDim.x) s += expf(row[j] - m);
  s = block_sum(s, scratch);
  const float inv = 1.0f / s;
  for (int64_t j = threadIdx.x; j < x.cols; j += blockDim.x) row[j] = expf(row[j] - m) * inv;
}

}  // namespace

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  const auto ra = rows_of<const float>(a, "add"), rb = rows_of<const float>(b, "add");
  const auto ro = rows_of<float>(out, "add");
  launch_rows(
      ro.rows, ro.cols,
      [=] __device__(int64_t r, int64_t c) { ro.data[r * ro.stride + c] = ra.data[r * ra.stride + c] + rb.data[r * rb.stride + c]; },
      "add");
}

void add_bias(Tensor& y, const Tensor& bias) {
  const auto ry = rows_of<float>(y, "add_bias");
  const void* b = bias.raw();
  const FloatKind kind = float_kind(bias);
  launch_rows(
      ry.rows, ry.cols, [=] __device__(int64_t r, int64_t c) { ry.data[r * ry.stride + c] += load_float(b, kind, c); }, "add_bias");
}

void copy(const Tensor& src, Tensor& dst) {
  if (src.numel() == 0) return;
  dst.copy_from(src);  // a pitched device-to-device copy
}

void store_rows(const Tensor& src, Tensor& dst, int64_t row0, const int32_t* device_row0) {
  if (dst.dtype() == DType::bf16) {  // a bf16 KV cache: the CPU's rounding, so both hold the same bytes
    const auto rs = rows_of<const float>(src, "store_rows");
    const auto rd = rows_of<uint16_t>(dst, "store_rows");
    launch_rows(
        rs.rows, rs.cols,
        [=] __device__(int64_t r, int64_t c) {
          const int64_t at = device_row0 != nullptr ? *device_row0 : row0;
          rd.data[(at + r) * rd.stride + c] = bf16_bits(rs.data[r * rs.stride + c]);
        },
        "store_rows");
    return;
  }
  if (device_row0 == nullptr) {
    Tensor target = dst.slice(0, row0, row0 + src.dim(0));
    return target.copy_from(src);
  }
  const auto rs = rows_of<const float>(src, "store_rows");
  const auto rd = rows_of<float>(dst, "store_rows");
  launch_rows(
      rs.rows, rs.cols, [=] __device__(int64_t r, int64_t c) { rd.data[(*device_row0 + r) * rd.stride + c] = rs.data[r * rs.stride + c]; },
      "store_rows");
}

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  const bool bf16_in = gate.dtype() == DType::bf16, bf16_out = out.dtype() == DType::bf16;
  if (bf16_in && bf16_out) silu_mul_as<__nv_bfloat16, __nv_bfloat16>(gate, up, out);
  else if (bf16_in) silu_mul_as<__nv_bfloat16, float>(gate, up, out);
  else if (bf16_out) silu_mul_as<float, __nv_bfloat16>(gate, up, out);
  else silu_mul_as<float, float>(gate, up, out);
}

void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) {
  const auto rx = rows_of<const float>(x, "sigmoid_mul"), rg = rows_of<const float>(gate, "sigmoid_mul");
  const auto ro = rows_of<float>(out, "sigmoid_mul");
  launch_rows(
      ro.rows, ro.cols,
      [=] __device__(int64_t r, int64_t c) {
        ro.data[r * ro.stride + c] = rx.data[r * rx.stride + c] / (1.0f + expf(-rg.data[r * rg.stride + c]));
      },
      "sigmoid_mul");
}

void softmax(Tensor& x) {
  const auto rx = rows_of<float>(x, "softmax");
  if (rx.rows == 0) return;
  softmax_kernel<<<static_cast<unsigned>(rx.rows), kThreads, 0, stream()>>>(rx);
  check_launch("softmax");
}

}  // namespace sanctum::ops::cuda

// Embedding lookup: out[i] = table[ids[i]], dense (f32/bf16/f16) or MLX-quantized rows.
#include "ops/cuda/common.cuh"
#include "ops/cuda/host_values.cuh"
#include "ops/cuda/kernels.h"

namespace sanctum::ops::cuda {

namespace {

__global__ void embedding_kernel(const int32_t* ids, int64_t n, int64_t cols, const void* dense, FloatKind dense_kind, int64_t stride,
                                 const uint32_t* codes, int bits, const void* scales, const void* biases, FloatKind s_kind,
                                 int64_t s_stride, int group, Rows<float> out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * cols) return;
  const int64_t t = i / cols, c = i % cols, row = ids[t];
  float v;
  if (codes != nullptr) {
    const int per = 32 / bits;
    const uint32_t code = (codes[row * stride + c / per] >> ((c % per) * bits)) & ((1u << bits) - 1u);
    v = load_float(scales, s_kind, row * s_stride + c / group) * static_cast<float>(code) + load_float(biases, s_kind, row * s_stride + c / group);
  } else {
    v = load_float(dense, dense_kind, row * stride + c);
  }
  out.data[t * out.stride + c] = v;
}

}  // namespace

void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) {
  const int64_t n = static_cast<int64_t>(ids.size()), cols = table.cols;
  if (n == 0 || cols == 0) return;
  const int32_t* dev_ids = device_ints(HostSlot::token_ids, ids);
  const auto ro = rows_of<float>(out, "embedding");
  const bool q = table.quantized();
  embedding_kernel<<<blocks_for(n * cols, 256), 256, 0, stream()>>>(
      dev_ids, n, cols, q ? nullptr : table.data.raw(), float_kind(table.data), table.data.stride(0), q ? table.data.data<uint32_t>() : nullptr,
      table.quant.bits, q ? table.scales.raw() : nullptr, q ? table.biases.raw() : nullptr, q ? float_kind(table.scales) : FloatKind::f32,
      q ? table.scales.stride(0) : 0, q ? table.quant.group_size : 1, ro);
  check_launch("embedding");
}

}  // namespace sanctum::ops::cuda

// Embedding lookup: out[i] = table[ids[i]], dense (f32/bf16/f16) or MLX-quantized rows.
#include "ops/cuda/common.cuh"
#include "ops/cuda/host_values.cuh"
#include "ops/cuda/kernels.h"

namespace sanctum::ops::cuda {

namespace {

__global__ void embedding_kernel(const int32_t* ids, int64_t n, int64_t cols, WeightView table, Rows<float> out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * cols) return;
  const int64_t t = i / cols, c = i % cols;
  out.data[t * out.stride + c] = weight_at(table, ids[t], c);
}

}  // namespace

void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) {
  const int64_t n = static_cast<int64_t>(ids.size()), cols = table.cols;
  if (n == 0 || cols == 0) return;
  const int32_t* dev_ids = device_ints(HostSlot::token_ids, ids);
  const auto ro = rows_of<float>(out, "embedding");
  embedding_kernel<<<blocks_for(n * cols, 256), 256, 0, stream()>>>(dev_ids, n, cols, weight_view(table), ro);
  check_launch("embedding");
}

}  // namespace sanctum::ops::cuda

// Embedding lookup: out[i] = table[ids[i]], dense (f32/bf16/f16) or MLX-quantized rows.
#include "ops/cuda/common.cuh"
#include "ops/cuda/host_values.cuh"
#include "ops/cuda/kernels.h"

namespace sanctum::ops::cuda {

namespace {

__global__ void embedding_kernel(const int32_t* ids, int64_t n, int64_t cols, int64_t vocab, WeightView table, Rows<float> out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * cols) return;
  const int64_t t = i / cols, c = i % cols;
  const int32_t id = ids[t];
  out.data[t * out.stride + c] = id >= 0 && id < vocab ? weight_at(table, id, c) : 0.0f;
}

}  // namespace

void embedding(const Weight& table, std::span<const int32_t> ids, const int32_t* device_ids, Tensor& out) {
  const int64_t n = out.dim(0), cols = table.cols;
  if (n == 0 || cols == 0) return;
  const int32_t* dev_ids = device_ids != nullptr ? device_ids : device_ints(HostSlot::token_ids, ids);
  const auto ro = rows_of<float>(out, "embedding");
  embedding_kernel<<<blocks_for(n * cols, 256), 256, 0, stream()>>>(dev_ids, n, cols, table.rows, weight_view(table), ro);
  check_launch("embedding");
}

}  // namespace sanctum::ops::cuda

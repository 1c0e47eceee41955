#pragma once
// f32 activation rows rounded to a contiguous bf16 buffer, as the tensor-core GEMMs read them
// (matmul.cu, moe_grouped.cu).
#include <cuda_bf16.h>

#include <cstdint>

namespace sanctum::ops::cuda {

// (n, k) f32 rows, row r at x + r * stride → out (n, k) bf16, contiguous.
void rows_to_bf16(const float* x, int64_t stride, int64_t n, int64_t k, __nv_bfloat16* out);

}  // namespace sanctum::ops::cuda

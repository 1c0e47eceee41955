#pragma once
// Weights dequantized to a dense bf16 copy for cuBLAS (dequantize.cu).
#include <cuda_bf16.h>

#include "tensor/weight.h"

namespace sanctum::ops::cuda {

// out (w.rows, w.cols) row-major, queued on the process's stream: w's values (weight_at) rounded to bf16.
void dequantize_to_bf16(const Weight& w, __nv_bfloat16* out);

}  // namespace sanctum::ops::cuda

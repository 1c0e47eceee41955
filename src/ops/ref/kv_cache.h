#pragma once
#include "ops/kv_format.h"
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

// The values a KV cache side holds, as (rows, kv_heads, head_dim) f32: the scalar reading of the
// formats in ops/kv_format.h, for tests of the kernels that read them in place.
Tensor dequantize_kv(const KvRows& rows);

}  // namespace sanctum::ops::ref

#pragma once
// The gated delta rule on the GPU in chunks of 64 tokens (WY / UT form), for prompts. The arguments
// and their checks are those of ops::gated_delta_rule (ops/gated_delta.h); chunks start at the first
// row of the call, so a caller that wants the same bits whatever the split (the prefix cache) starts
// calls at multiples of 64 of the sequence position, as the GatedDeltaNet block does.
#include <cstdint>

#include "ops/gated_delta.h"
#include "tensor/tensor.h"

namespace sanctum::ops::cuda {

// Whether gated_delta_rule runs `chunked` requests (prompts) on the chunked kernel; when off, every
// request walks the tokens.
constexpr bool kChunkedPrefill = true;

// Longest key head the chunked kernel takes; longer ones run the sequential kernel.
constexpr int64_t kChunkedMaxKeyDim = 128;

// How the chunk products are computed: tensor cores with each f32 operand split into two tf32
// halves (3 products, ~f32 accuracy), or plain f32 FMAs (slower; the check on the tensor-core path).
enum class ChunkedMath { tensor_cores, f32 };

// Requires shape.key_dim <= kChunkedMaxKeyDim.
void gated_delta_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                         const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out,
                         ChunkedMath math = ChunkedMath::tensor_cores);

}  // namespace sanctum::ops::cuda

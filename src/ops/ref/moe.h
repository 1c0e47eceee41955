#pragma once
// Scalar references of the MoE grouping ops: the truth in tests. Arguments are assumed checked.
#include <cstdint>

#include "ops/moe.h"
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

// Stable counting sort: offsets (n_experts + 1), sorted (m) as ops::moe_group defines them.
void moe_group(const int32_t* ids, int64_t m, int64_t n_experts, int32_t* offsets, int32_t* sorted);

// ops::moe_expert_tasks: tasks (1 + m * kExpertTaskWords) as it defines them, unused words left as they are.
void moe_expert_tasks(const int32_t* ids, int64_t m, int64_t n_experts, int32_t* tasks);

// ops::grouped_expert_matmul on host arrays, with double sums. bf16_operands: x and each weight
// element (scale * code + bias, one fused multiply-add, as the GPU dequantizes) are rounded to bf16
// first, which is the GPU's bf16-mode contract; otherwise the exact f32 operands.
void grouped_expert_matmul(const Tensor& x, const ExpertSet& experts, const int32_t* offsets, const int32_t* sorted, int64_t m,
                           GroupedRows mode, bool bf16_operands, Tensor& y);

}  // namespace sanctum::ops::ref

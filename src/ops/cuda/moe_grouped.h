#pragma once
// CUDA entry points of the grouped MoE ops (moe_grouped.cu); arguments are checked by src/ops/moe.cc.
// Nothing here waits for the device: expert boundaries are read by the kernels.
#include <cstdint>

#include "ops/moe.h"
#include "tensor/tensor.h"

namespace sanctum::ops::cuda {

void moe_group(const Tensor& ids, int64_t n_experts, Tensor& offsets, Tensor& sorted);
// ops::moe_expert_tasks in one launch, where expert_tasks_fit (the ids and two words an expert in one
// block's shared memory).
constexpr int64_t kExpertTaskSharedBytes = 48 * 1024;
bool expert_tasks_fit(int64_t m, int64_t n_experts);
void moe_expert_tasks(const Tensor& ids, int64_t n_experts, Tensor& tasks);
void grouped_expert_matmul(const Tensor& x, const ExpertSet& experts, const Tensor& offsets, const Tensor& sorted, GroupedRows mode,
                           Tensor& y);

}  // namespace sanctum::ops::cuda

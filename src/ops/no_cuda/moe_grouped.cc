// Stand-ins for the grouped MoE ops in a build without the CUDA backend (see kernels.cc here).
#include "ops/cuda/moe_grouped.h"
#include "base/error.h"

namespace sanctum::ops::cuda {

void moe_group(const Tensor&, int64_t, Tensor&, Tensor&) {
  fail(ErrorKind::unsupported, "[moe_group] this sanctum was built without CUDA");
}
bool expert_tasks_fit(int64_t, int64_t) { return false; }
void moe_expert_tasks(const Tensor&, int64_t, Tensor&) {
  fail(ErrorKind::unsupported, "[moe_expert_tasks] this sanctum was built without CUDA");
}
void grouped_expert_matmul(const Tensor&, const ExpertSet&, const Tensor&, const Tensor&, GroupedRows, Tensor&) {
  fail(ErrorKind::unsupported, "[grouped_expert_matmul] this sanctum was built without CUDA");
}

}  // namespace sanctum::ops::cuda

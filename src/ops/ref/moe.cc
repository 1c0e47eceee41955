#include "ops/ref/moe.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/op_util.h"
#include "ops/ref/matmul.h"
#include "tensor/dtype.h"

namespace sanctum::ops::ref {

void moe_group(const int32_t* ids, int64_t m, int64_t n_experts, int32_t* offsets, int32_t* sorted) {
  std::vector<int32_t> next(static_cast<size_t>(n_experts) + 1, 0);
  for (int64_t i = 0; i < m; ++i) ++next[static_cast<size_t>(ids[i]) + 1];
  for (int64_t e = 0; e < n_experts; ++e) next[static_cast<size_t>(e) + 1] += next[static_cast<size_t>(e)];
  for (int64_t e = 0; e <= n_experts; ++e) offsets[e] = next[static_cast<size_t>(e)];
  for (int64_t i = 0; i < m; ++i) sorted[next[static_cast<size_t>(ids[i])]++] = static_cast<int32_t>(i);
}

void moe_expert_tasks(const int32_t* ids, int64_t m, int64_t n_experts, int32_t* tasks) {
  std::vector<int32_t> offsets(static_cast<size_t>(n_experts) + 1), sorted(static_cast<size_t>(m));
  moe_group(ids, m, n_experts, offsets.data(), sorted.data());
  constexpr auto kSlots = static_cast<int32_t>(kExpertTaskSlots);
  int64_t count = 0;
  for (int64_t e = 0; e < n_experts; ++e)
    for (int32_t j = offsets[static_cast<size_t>(e)]; j < offsets[static_cast<size_t>(e) + 1]; j += kSlots) {
      int32_t* task = tasks + 1 + count++ * kExpertTaskWords;
      task[0] = static_cast<int32_t>(e);
      task[1] = std::min(kSlots, offsets[static_cast<size_t>(e) + 1] - j);
      for (int32_t i = 0; i < task[1]; ++i) task[2 + i] = sorted[static_cast<size_t>(j + i)];
    }
  tasks[0] = static_cast<int32_t>(count);
}

namespace {
float round_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }
}  // namespace

void grouped_expert_matmul(const Tensor& x, const ExpertSet& experts, const int32_t* offsets, const int32_t* sorted, int64_t m,
                           GroupedRows mode, bool bf16_operands, Tensor& y) {
  const int64_t fan = mode == GroupedRows::gather ? m / x.dim(0) : 1, k = experts[0].cols, rows = experts[0].rows;
  std::vector<float> xv(static_cast<size_t>(k));
  for (int64_t e = 0; e < experts.size(); ++e) {
    const Weight& w = experts[e];
    for (int64_t j = offsets[e]; j < offsets[e + 1]; ++j) {
      const int64_t xr = mode == GroupedRows::gather ? sorted[j] / fan : j, yr = mode == GroupedRows::gather ? j : sorted[j];
      const float* xp = detail::row_ptr<const float>(x, xr);
      for (int64_t c = 0; c < k; ++c) xv[static_cast<size_t>(c)] = bf16_operands ? round_bf16(xp[c]) : xp[c];
      float* yp = detail::row_ptr<float>(y, yr);
      for (int64_t r = 0; r < rows; ++r) {
        double acc = 0.0;
        for (int64_t c = 0; c < k; ++c) {
          const float wv = bf16_operands ? round_bf16(weight_at_fma(w, r, c)) : weight_at_fma(w, r, c);
          acc += static_cast<double>(xv[static_cast<size_t>(c)]) * static_cast<double>(wv);
        }
        yp[r] = static_cast<float>(acc);
      }
    }
  }
}

}  // namespace sanctum::ops::ref

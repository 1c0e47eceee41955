#pragma once
// One column of a token's MoE combine as device code, shared by the combine kernel (moe.cu) and the
// expert down launch that combines its own rows (matvec_tiles.cuh), so that both give the same bits:
// the sum over ranks r < k of weight r times row r, then the shared expert's row times
// sigmoid(its gate logit), in that order (moe_combine's order on the host).
#include <cstdint>

namespace sanctum::ops::cuda {

// rank(r): row r's value in this column (k + 1 values where shared, the last the shared expert's).
template <class Rank>
__device__ __forceinline__ float combine_column(const float* weights, int64_t k, Rank rank, bool shared, float shared_logit) {
  float o = 0.0f;
  for (int64_t r = 0; r < k; ++r) o += weights[r] * rank(r);
  if (shared) {
    const float g = 1.0f / (1.0f + expf(-shared_logit));
    o += g * rank(k);
  }
  return o;
}

}  // namespace sanctum::ops::cuda

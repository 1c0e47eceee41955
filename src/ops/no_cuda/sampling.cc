// Stand-ins for a build without the CUDA backend (see kernels.cc): only reached for GPU tensors.
#include "ops/cuda/sampling.cuh"
#include "base/error.h"

namespace sanctum::ops::cuda {

void argmax_rows(const Tensor&, Tensor&, const Tensor&) {
  fail(ErrorKind::unsupported, "[argmax_rows] this sanctum was built without CUDA");
}
void sample_rows(const Tensor&, const RowSampling&, std::span<const double>, Tensor&, const Tensor&) {
  fail(ErrorKind::unsupported, "[sample_rows] this sanctum was built without CUDA");
}

void feed_pick(const Tensor&, Tensor&) { fail(ErrorKind::unsupported, "[feed_pick] this sanctum was built without CUDA"); }

}  // namespace sanctum::ops::cuda

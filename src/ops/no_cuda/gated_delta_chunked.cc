// Stand-in for the chunked gated delta rule in a build without the CUDA backend (see kernels.cc here).
#include "ops/cuda/gated_delta_chunked.h"
#include "base/error.h"

namespace sanctum::ops::cuda {

void gated_delta_chunked(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const GatedDeltaShape&, Tensor&, Tensor&, ChunkedMath) {
  fail(ErrorKind::unsupported, "[gated_delta_chunked] this sanctum was built without CUDA");
}

}  // namespace sanctum::ops::cuda

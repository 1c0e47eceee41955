// The switch for programmatic dependent launch (common.cuh's launch_early).
#include "base/env.h"
#include "ops/cuda/common.cuh"

namespace sanctum::ops::cuda {

bool early_launch_enabled() {
  static const bool enabled = !switched_off("SANCTUM_EARLY_LAUNCH");
  return enabled;
}

}  // namespace sanctum::ops::cuda

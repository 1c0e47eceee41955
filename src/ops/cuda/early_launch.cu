// The switch for programmatic dependent launch (common.cuh's launch_early).
#include "base/tuning.h"
#include "ops/cuda/common.cuh"

namespace sanctum::ops::cuda {

bool early_launch_enabled() { return current_tuning().on(Knob::early_launch); }

}  // namespace sanctum::ops::cuda

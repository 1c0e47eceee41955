// The switch for programmatic dependent launch (common.cuh's launch_early).
#include <cstdlib>
#include <cstring>

#include "ops/cuda/common.cuh"

namespace sanctum::ops::cuda {

bool early_launch_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("SANCTUM_EARLY_LAUNCH");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return enabled;
}

}  // namespace sanctum::ops::cuda

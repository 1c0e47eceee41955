#pragma once
// Switches in the environment that turn a feature off (for comparisons): SANCTUM_CUDA_GRAPHS=0 and
// the like.
#include <cstdlib>
#include <cstring>

namespace sanctum {

// Whether the environment variable `name` is set to "0".
inline bool switched_off(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "0") == 0;
}

}  // namespace sanctum

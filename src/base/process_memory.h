#pragma once
// The process's resident memory, as the kernel counts it (/proc/self/statm): what --memory-limit-mb
// is meant to bound, shown beside the plan on /health.
#include <cstddef>
#include <cstdint>

namespace sanctum {

// Resident bytes now (0 where /proc is not readable).
size_t resident_bytes();

// Bytes of weights held in copies of their own layout (the int8 kernels' repacked weights), which
// whoever makes or frees one adds or takes away here: with mapped_resident_bytes() (base/mapped_file.h),
// the weights' share of the resident set.
void count_weight_copy(int64_t bytes);
size_t weight_copy_bytes();

}  // namespace sanctum

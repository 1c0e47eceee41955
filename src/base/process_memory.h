#pragma once
// The process's resident memory, as the kernel counts it (/proc/self/statm): what --memory-limit-mb
// is meant to bound, shown beside the plan on /health.
#include <cstddef>

namespace sanctum {

// Resident bytes now (0 where /proc is not readable).
size_t resident_bytes();

}  // namespace sanctum

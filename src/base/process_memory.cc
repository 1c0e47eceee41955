#include "base/process_memory.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace sanctum {

size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int read = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (read != 2) return 0;
  return static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

namespace {
std::atomic<int64_t> g_weight_copies{0};
}  // namespace

void count_weight_copy(int64_t bytes) { g_weight_copies.fetch_add(bytes, std::memory_order_relaxed); }

size_t weight_copy_bytes() { return static_cast<size_t>(std::max<int64_t>(0, g_weight_copies.load(std::memory_order_relaxed))); }

}  // namespace sanctum

#pragma once
// Resident memory of one mapping, for tests that check pages leave the resident set.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace sanctum::test {

// Resident KiB of the mapping that starts at `start`, from /proc/self/smaps (-1 when not found).
inline long resident_kib(const void* start) {
  char head[32];
  std::snprintf(head, sizeof head, "%lx-", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(start)));
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    if (line.rfind(head, 0) == 0) in = true;
    else if (in && line.rfind("Rss:", 0) == 0) return std::atol(line.c_str() + 4);
  }
  return -1;
}

}  // namespace sanctum::test

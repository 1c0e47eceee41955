#pragma once
// Hashes many files at once. Each worker takes the largest file not yet started (longest-processing-
// time-first), so one big shard starts early instead of finishing last. One file is one sequential
// SHA-256 stream, so the speed-up is bounded by the number of files as well as by cores.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "security/sha256.h"

namespace sanctum::security {

struct HashOutcome {
  bool ok = false;
  FileDigest digest;                       // valid when ok
  std::shared_ptr<const PinnedFile> file;  // valid when ok: the file hashed, still open
  std::string error;                       // the Error's message when !ok (it names the path)
};

struct HashRun {
  std::vector<HashOutcome> outcomes;  // same order as the input paths
  uint64_t bytes = 0;
  double seconds = 0;
  int threads = 0;
  double gb_per_s() const { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0; }
};

// Cores this process may run on (sched_getaffinity), at least 1.
int available_cores();

// threads <= 0: one per available core, capped at the number of files. Each file is opened once and
// stays open in its outcome, so a loader can map the very bytes that were hashed. Never throws for a
// bad file; each failure lands in its outcome so the caller can name every file that failed.
HashRun hash_files_parallel(const std::vector<std::string>& paths, int threads = 0);

}  // namespace sanctum::security

#include "security/parallel_hash.h"

#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <thread>

#include "base/error.h"

namespace sanctum::security {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

HashRun hash_files_parallel(const std::vector<std::string>& paths, int threads) {
  HashRun run;
  run.outcomes.resize(paths.size());
  if (paths.empty()) return run;

  // Largest first; files that cannot be stat'ed sort last and report their error when opened.
  std::vector<uint64_t> sizes(paths.size(), 0);
  for (size_t i = 0; i < paths.size(); ++i) {
    struct stat st {};
    if (::stat(paths[i].c_str(), &st) == 0) sizes[i] = static_cast<uint64_t>(st.st_size);
  }
  std::vector<size_t> order(paths.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });

  int n = threads > 0 ? threads : available_cores();
  n = static_cast<int>(std::min<size_t>(static_cast<size_t>(n), paths.size()));
  run.threads = n;

  // Buffers are allocated here so an allocation failure throws on the caller's thread.
  std::vector<std::unique_ptr<uint8_t[]>> buffers;
  for (int t = 0; t < n; ++t) buffers.emplace_back(new uint8_t[kHashReadBuffer]);

  std::atomic<size_t> next{0};
  auto worker = [&](int t) {
    uint8_t* buffer = buffers[static_cast<size_t>(t)].get();
    for (size_t k = next.fetch_add(1); k < order.size(); k = next.fetch_add(1)) {
      size_t i = order[k];
      HashOutcome& out = run.outcomes[i];
      try {
        out.file = PinnedFile::open(paths[i]);
        out.digest = hash_file(*out.file, buffer, kHashReadBuffer);
        out.ok = true;
      } catch (const std::exception& e) {
        out.error = e.what();
      }
    }
  };

  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(n - 1));
  for (int t = 1; t < n; ++t) pool.emplace_back(worker, t);
  worker(0);  // the calling thread works too
  for (auto& th : pool) th.join();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& o : run.outcomes)
    if (o.ok) run.bytes += o.digest.bytes;
  return run;
}

}  // namespace sanctum::security

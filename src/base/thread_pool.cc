#include "base/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <memory>

namespace sanctum {

namespace {
constexpr int kSpinIterations = 200000;  // ~50-100 us of polling before a worker sleeps

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::dispatch(Thunk thunk, void* ctx) {
  if (n_threads_ == 1) {
    thunk(ctx, 0);
    return;
  }
  std::lock_guard<std::mutex> region(dispatch_mutex_);
  thunk_ = thunk;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  thunk(ctx, 0);
  while (pending_.load(std::memory_order_acquire) != 0) cpu_relax();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    uint64_t gen;
    while ((gen = generation_.load(std::memory_order_acquire)) == seen && spins < kSpinIterations) {
      cpu_relax();
      ++spins;
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load()) return;
    thunk_(ctx_, index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

int default_thread_count() {
  cpu_set_t set;
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, n);
}

namespace {
std::atomic<int> g_requested_threads{0};
}

void set_compute_threads(int n) { g_requested_threads = n; }

ThreadPool& compute_pool() {
  static ThreadPool pool(g_requested_threads.load() > 0 ? g_requested_threads.load() : default_thread_count());
  return pool;
}

}  // namespace sanctum

#include "base/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <memory>

namespace sanctum {

namespace {
// A worker polls this long for the next region before it sleeps on the condition variable.
constexpr auto kPollFor = std::chrono::microseconds(200);
// Past this many polls a waiting thread also yields its core at each poll: when the machine has more
// runnable threads than cores, the thread being waited for may be the one that needs it. On an idle
// machine a yield returns at once, so waits there stay as short as pure spinning.
constexpr int kPollsBeforeYield = 2000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// One poll of a wait loop that has polled `polls` times before.
inline void wait_a_little(int polls) {
  if (polls < kPollsBeforeYield) cpu_relax();
  else sched_yield();
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
  for (int polls = 0; pending_.load(std::memory_order_acquire) != 0; ++polls) wait_a_little(polls);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen;
    const auto until = std::chrono::steady_clock::now() + kPollFor;
    for (int polls = 0; (gen = generation_.load(std::memory_order_acquire)) == seen; ++polls) {
      if (polls % 256 == 255 && std::chrono::steady_clock::now() > until) break;
      wait_a_little(polls);
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

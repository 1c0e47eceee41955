#pragma once
// A persistent pool of worker threads for data-parallel kernels. The calling thread takes part,
// so a pool of size N runs N-1 workers. Workers poll for about 200 us before sleeping: decode issues
// many small parallel regions per token and a condition-variable wake-up per region costs too much.
// Waits yield the core after a short spin, so an oversubscribed machine runs the awaited thread.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace sanctum {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index) once on each of size() threads and waits for all of them.
  template <class F>
  void run_on_all(F&& fn) {
    auto thunk = [](void* ctx, int thread) { (*static_cast<std::remove_reference_t<F>*>(ctx))(thread); };
    dispatch(thunk, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Splits [0, n) into contiguous chunks of at least `grain` items (one chunk per thread at most) and
  // calls fn(begin, end) for each. The split depends only on n, grain and size(), so results that
  // depend on chunking are reproducible.
  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    int64_t chunks = std::min<int64_t>(n_threads_, (n + grain - 1) / std::max<int64_t>(grain, 1));
    if (chunks <= 1) {
      fn(int64_t{0}, n);
      return;
    }
    run_on_all([&](int t) {
      if (t >= chunks) return;
      int64_t begin = n * t / chunks, end = n * (t + 1) / chunks;
      if (begin < end) fn(begin, end);
    });
  }

 private:
  using Thunk = void (*)(void*, int);
  void dispatch(Thunk thunk, void* ctx);
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  Thunk thunk_ = nullptr;
  void* ctx_ = nullptr;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::mutex dispatch_mutex_;  // one parallel region at a time
};

// Number of threads for compute: physical cores available to this process, or the override.
int default_thread_count();
// The process-wide pool used by CPU kernels. set_compute_threads must run before first use to take effect.
void set_compute_threads(int n);
ThreadPool& compute_pool();

}  // namespace sanctum

#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace sanctum {

TEST(ThreadPool, parallel_for_covers_every_index_exactly_once) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 7, 100, 1001}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, run_on_all_runs_once_per_thread_many_times) {
  ThreadPool pool(4);
  std::atomic<int> total{0};
  for (int round = 0; round < 2000; ++round) pool.run_on_all([&](int) { total++; });
  EXPECT_EQ(total.load(), 8000);
}

TEST(ThreadPool, single_thread_pool_runs_inline) {
  ThreadPool pool(1);
  int calls = 0;
  pool.parallel_for(10, 1, [&](int64_t b, int64_t e) { calls += static_cast<int>(e - b); });
  EXPECT_EQ(calls, 10);
}

}  // namespace sanctum

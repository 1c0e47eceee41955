// Admission of requests that continue one prompt-cache entry: on the CPU each maps the entry's KV
// pages instead of copying them, so the engine counts those rows once for all of them and runs more
// of them at once within --kv-cache-mb (EngineOptions::state_bytes). Also run with
// SANCTUM_TUNE=kv_shared_pages=0 (ctest's .copied_pages), where every continuation counts its rows
// in full. A real attention-only model (the qwen2 fixture), so that the prompt cache holds real KV.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <random>

#include "engine/engine.h"
#include "engine_job.h"
#include "server/server_metrics.h"
#include "tensor/host_rows.h"

namespace sanctum::server {
namespace {

using testing::job_of;

const std::string kModel = std::string(SANCTUM_TEST_DATA_DIR) + "/peft_adapters/qwen2_dora/base";

// Counts tokens and records, at each, how many sequences the engine runs; `gate` (optional) holds the
// engine thread at the first token until released.
class CountingSink : public GenerationSink {
 public:
  CountingSink(const Engine& engine, std::atomic<size_t>& most_running) : engine_(engine), most_running_(most_running) {}
  bool on_token(int, const TokenOutput&) override {
    size_t now = engine_.running(), seen = most_running_.load();
    while (now > seen && !most_running_.compare_exchange_weak(seen, now)) {
    }
    if (gate && !held_) {
      held_ = true;
      started.set_value();
      gate->wait();
    }
    return true;
  }
  void on_choice_end(int, const GenerationResult& r) override { finish = r.finish; }
  void on_done(const std::string& error) override { done.set_value(error); }

  std::shared_future<void>* gate = nullptr;
  std::promise<void> started;
  std::promise<std::string> done;
  FinishReason finish = FinishReason::length;

 private:
  const Engine& engine_;
  std::atomic<size_t>& most_running_;
  bool held_ = false;
};

TEST(EngineSharedPrefix, continuations_of_one_cached_prefix_count_its_rows_once) {
  ServerMetrics metrics;
  auto model = load_model(kModel, Device::cpu, Tuning::from_environment());
  const bool shared = model->config().tuning.on(Knob::kv_shared_pages) && HostRows::available();
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(model->vocab_size() - 1));
  std::vector<int32_t> prefix(1500);
  for (auto& t : prefix) t = id(rng);
  auto continuation = [&](int i) {
    std::vector<int32_t> p = prefix;
    p.insert(p.end(), {static_cast<int32_t>(i), static_cast<int32_t>(i + 1), static_cast<int32_t>(i + 2)});
    return p;
  };
  // The budget: the holder below, plus two and a half continuations counted in full. A continuation
  // reaches 1,603 rows (1,792 in whole blocks); it maps the entry's first 1,280 (5 blocks) and holds
  // 512 of its own, so four of them count 1,280 + 4 x 512 = 3,328 rows, under the 4,480 that two and
  // a half full ones make, while three full ones (5,376) are over.
  EngineOptions options;
  options.max_seqs = 8;
  options.prompt_cache_bytes = size_t{64} << 20;
  std::atomic<size_t> most_running{0};
  std::unique_ptr<Engine> engine;
  {
    EngineOptions probe_options = options;
    Engine probe("probe", load_model(kModel, Device::cpu, Tuning::from_environment()), probe_options, metrics.engine);
    const size_t holder = probe.reserve_bytes(*job_of({1}, 40, nullptr));
    const size_t full = probe.reserve_bytes(*job_of(continuation(0), 100, nullptr));
    options.state_bytes = holder + full * 5 / 2;
  }
  engine = std::make_unique<Engine>("qwen2", std::move(model), options, metrics.engine);

  // The prefix into the prompt cache (an attention-only model stores the whole sequence at its end).
  {
    std::atomic<size_t> unused{0};
    auto sink = std::make_shared<CountingSink>(*engine, unused);
    ASSERT_EQ(engine->submit(job_of(prefix, 1, sink)), Engine::Admit::accepted);
    EXPECT_EQ(sink->done.get_future().get(), "");
  }
  // A holder keeps the engine at its first token while four continuations queue, then lets go.
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  auto holder = std::make_shared<CountingSink>(*engine, most_running);
  holder->gate = &gate;
  ASSERT_EQ(engine->submit(job_of({1}, 40, holder)), Engine::Admit::accepted);
  holder->started.get_future().wait();
  std::vector<std::shared_ptr<CountingSink>> sinks;
  for (int i = 0; i < 4; ++i) {
    sinks.push_back(std::make_shared<CountingSink>(*engine, most_running));
    ASSERT_EQ(engine->submit(job_of(continuation(10 * i), 100, sinks.back())), Engine::Admit::accepted);
  }
  release.set_value();
  for (auto& s : sinks) {
    EXPECT_EQ(s->done.get_future().get(), "");
    EXPECT_EQ(s->finish, FinishReason::length);
  }
  EXPECT_EQ(holder->done.get_future().get(), "");
  const PrefixCacheStats stats = engine->prompt_cache_stats();
  EXPECT_GE(stats.hits, 4) << "each continuation restored the cached prefix";
  if (shared) EXPECT_EQ(most_running.load(), 5u) << "the holder and all four continuations at once";
  else EXPECT_EQ(most_running.load(), 3u) << "the holder and two continuations counted in full";
  engine.reset();
}

}  // namespace
}  // namespace sanctum::server

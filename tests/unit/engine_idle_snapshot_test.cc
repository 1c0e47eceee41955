// The engine's idle work on a hybrid model (end-of-generation snapshots), against a fake
// hybrid model that logs every forward: the work starts only after the response is delivered, runs
// in aligned steps of at most 64 tokens, and a request that arrives meanwhile runs right after the
// step under way (no timing involved: the log orders the forwards). Interrupted work resumes after
// the request, or is dropped when the request was the next turn and already went past it.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "engine_job.h"
#include "server/server_metrics.h"

namespace sanctum::server {
namespace {

using testing::job_of;

ModelConfig fake_config() {
  ModelConfig c;
  c.model_type = "fake_hybrid";
  c.vocab_size = 8;
  c.eos_token_ids = {7};
  return c;
}

struct Call {
  int64_t position = 0, tokens = 0;
  LogitsFor which = LogitsFor::last;
  bool idle = false;  // the worker was not running a request
};

// One GatedDeltaNet-like layer whose "recurrent state" sums the tokens it has seen; next token is
// (last + 1) % 7.
class FakeHybridModel : public Model {
 public:
  FakeHybridModel() : Model(fake_config()), logits_(Tensor::zeros({1, 8}, DType::f32)) {}
  SequenceState new_state() const override {
    std::vector<KvCache> kv(1);
    std::vector<LinearAttentionState> linear{{Tensor::zeros({3, 4}, DType::f32), Tensor::zeros({2, 4, 4}, DType::f32)}};
    return SequenceState(std::move(kv), std::move(linear));
  }
  Tensor forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which) override {
    Call call{state.length(), static_cast<int64_t>(tokens.size()), which, worker && !worker->busy()};
    {
      std::lock_guard<std::mutex> lock(mutex);
      calls.push_back(call);
    }
    if (on_forward) on_forward(call);
    for (int32_t t : tokens) state.linear(0).recurrent.data<float>()[0] += static_cast<float>(t);
    state.advance(static_cast<int64_t>(tokens.size()));
    float* row = logits_.data<float>();
    for (int i = 0; i < 8; ++i) row[i] = static_cast<float>(i) * 0.1f;
    row[(tokens.back() + 1) % 7] = 5.0f;
    return which == LogitsFor::none ? Tensor{} : logits_;
  }
  size_t weight_bytes_per_token() const override { return 0; }

  Engine* worker = nullptr;
  std::function<void(const Call&)> on_forward;  // on the worker thread
  std::mutex mutex;
  std::vector<Call> calls;

 private:
  Tensor logits_;
};

class Sink : public GenerationSink {
 public:
  bool on_token(int, const TokenOutput& t) override {
    tokens.push_back(t.token);
    return true;
  }
  void on_choice_end(int, const GenerationResult&) override {}
  void on_done(const std::string& error) override {
    delivered = true;
    done.set_value(error);
  }
  std::vector<int32_t> tokens;
  std::atomic<bool> delivered{false};
  std::promise<std::string> done;
};

std::vector<int32_t> counting(size_t n, int32_t from) {
  std::vector<int32_t> p;
  for (size_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((from + static_cast<int32_t>(i)) % 7));
  return p;
}

// Until the worker has no idle work left (the fake's steps take microseconds).
void wait_idle(const Engine& worker) {
  for (int i = 0; i < 20000 && worker.pending_snapshots() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(worker.pending_snapshots(), 0u);
}

struct Fixture {
  ServerMetrics metrics;
  FakeHybridModel* fake;
  std::unique_ptr<Engine> worker;
  Fixture() {
    auto model = std::make_unique<FakeHybridModel>();
    fake = model.get();
    worker = std::make_unique<Engine>("fake", std::move(model), EngineOptions{4, size_t{64} << 20}, metrics.engine);
    fake->worker = worker.get();
  }
  std::vector<Call> calls() {
    std::lock_guard<std::mutex> lock(fake->mutex);
    return fake->calls;
  }
};

TEST(ServerIdleSnapshot, runs_after_the_response_in_aligned_steps_and_yields_to_a_request_within_one_step) {
  Fixture f;
  // 300 prompt tokens + 200 generated: prompt snapshot at 256, end-of-generation snapshot at 448.
  auto first = std::make_shared<Sink>();
  auto other = std::make_shared<Sink>();
  std::atomic<bool> delivered_before_idle_work{true};
  int idle_calls = 0;
  f.fake->on_forward = [&](const Call& c) {
    if (!c.idle) return;
    if (!first->delivered) delivered_before_idle_work = false;
    if (++idle_calls == 1) {  // a request arrives while the first step runs
      ASSERT_EQ(f.worker->submit(job_of(counting(10, 3), 3, other)), Engine::Admit::accepted);
    }
  };
  ASSERT_EQ(f.worker->submit(job_of(counting(300, 1), 200, first)), Engine::Admit::accepted);
  EXPECT_EQ(first->done.get_future().get(), "");
  EXPECT_EQ(other->done.get_future().get(), "");
  wait_idle(*f.worker);
  EXPECT_TRUE(delivered_before_idle_work);

  const std::vector<Call> calls = f.calls();
  std::vector<size_t> idle;
  for (size_t i = 0; i < calls.size(); ++i)
    if (calls[i].idle) idle.push_back(i);
  ASSERT_EQ(idle.size(), 3u);  // 256 -> 320 -> 384 -> 448
  // The request submitted during the first step is the very next forward: it waited for that step only.
  ASSERT_LT(idle[0] + 1, calls.size());
  EXPECT_FALSE(calls[idle[0] + 1].idle);
  EXPECT_EQ(calls[idle[0] + 1].tokens, 10);
  EXPECT_EQ(calls[idle[0] + 1].position, 0);
  // Then the work resumes where it stopped (from the stepping stone at 320) and reaches 448.
  EXPECT_EQ(calls[idle[0]].position, 256);
  EXPECT_EQ(calls[idle[1]].position, 320);
  EXPECT_EQ(calls[idle[2]].position, 384);
  for (size_t i : idle) {
    EXPECT_LE(calls[i].tokens, 64);
    EXPECT_EQ((calls[i].position + calls[i].tokens) % 64, 0);
    EXPECT_EQ(calls[i].which, LogitsFor::none);
  }
  EXPECT_EQ(f.worker->snapshot_steps(), 3);
  EXPECT_EQ(f.worker->snapshots_built(), 1);

  // The next turn (prompt + answer + a new message) continues from 448.
  std::vector<int32_t> next = counting(300, 1);
  next.insert(next.end(), first->tokens.begin(), first->tokens.end());
  for (int32_t t : counting(20, 5)) next.push_back(t);
  const int64_t reused_before = f.worker->prompt_cache_stats().reused_tokens;
  auto turn = std::make_shared<Sink>();
  f.worker->submit(job_of(next, 2, turn));
  turn->done.get_future().get();
  EXPECT_EQ(f.worker->prompt_cache_stats().reused_tokens - reused_before, 448);
  EXPECT_LE(f.worker->prompt_cache_stats().bytes, size_t{64} << 20);
}

TEST(ServerIdleSnapshot, the_next_turn_arriving_mid_work_continues_from_it_and_supersedes_it) {
  Fixture f;
  auto first = std::make_shared<Sink>();
  auto turn = std::make_shared<Sink>();
  std::vector<int32_t> next;
  int idle_calls = 0;
  f.fake->on_forward = [&](const Call& c) {
    if (c.idle && ++idle_calls == 1) f.worker->submit(job_of(next, 3, turn));
  };
  // The first answer is known in advance (greedy on the fake): build the next turn's prompt from it.
  const std::vector<int32_t> prompt = counting(300, 1);
  next = prompt;
  for (int32_t t = (prompt.back() + 1) % 7, i = 0; i < 200; ++i, t = (t + 1) % 7) next.push_back(t);
  for (int32_t t : counting(20, 5)) next.push_back(t);
  f.worker->submit(job_of(prompt, 200, first));
  first->done.get_future().get();
  turn->done.get_future().get();
  wait_idle(*f.worker);
  // The turn arrived during the step 256 -> 320 and continued from the stepping stone at 320; its
  // own prompt snapshot (512) passes the interrupted work's target (448), which is then dropped.
  EXPECT_EQ(f.worker->snapshot_steps(), 1);
  EXPECT_EQ(f.worker->snapshots_built(), 0);
  const PrefixCacheStats st = f.worker->prompt_cache_stats();
  EXPECT_EQ(st.reused_tokens, 320);
  EXPECT_EQ(st.hits, 1);
}

TEST(ServerIdleSnapshot, no_idle_work_without_the_prompt_cache) {
  ServerMetrics metrics;
  auto model = std::make_unique<FakeHybridModel>();
  FakeHybridModel* fake = model.get();
  Engine worker("fake", std::move(model), EngineOptions{4, 0}, metrics.engine);
  fake->worker = &worker;
  auto sink = std::make_shared<Sink>();
  worker.submit(job_of(counting(300, 1), 200, sink));
  sink->done.get_future().get();
  EXPECT_EQ(worker.pending_snapshots(), 0u);
  EXPECT_EQ(worker.snapshot_steps(), 0);
}

}  // namespace
}  // namespace sanctum::server

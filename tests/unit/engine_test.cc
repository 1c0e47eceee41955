// The engine against a fake model: queue bounds, cancellation within a step, n choices sharing one
// prefill, concurrent requests in one batch up to --max-seqs, logprobs and shutdown. The fake's next token is (last + 1) % 7, so greedy
// output is predictable.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <mutex>

#include "engine/engine.h"
#include "engine_job.h"
#include "server/server_metrics.h"

namespace sanctum::server {
namespace {

ModelConfig fake_config() {
  ModelConfig c;
  c.model_type = "fake";
  c.vocab_size = 8;
  c.eos_token_ids = {7};
  return c;
}

class FakeModel : public Model {
 public:
  FakeModel() : Model(fake_config()), logits_(Tensor::zeros({1, 8}, DType::f32)) {}
  SequenceState new_state() const override { return SequenceState(); }
  Tensor forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor) override {
    state.advance(static_cast<int64_t>(tokens.size()));
    float* row = logits_.data<float>();
    for (int i = 0; i < 8; ++i) row[i] = static_cast<float>(i) * 0.1f;
    row[(tokens.back() + 1) % 7] = 5.0f;
    ++forwards;
    if (tokens.size() > 1) ++prompt_forwards;
    return logits_;
  }
  Tensor forward_batch(std::span<const BatchEntry> batch) override {
    largest_batch = std::max(largest_batch.load(), static_cast<int>(batch.size()));
    return Model::forward_batch(batch);
  }
  size_t weight_bytes_per_token() const override { return 0; }
  std::atomic<int> forwards{0}, prompt_forwards{0}, largest_batch{0};

 private:
  Tensor logits_;
};

class RecordingSink : public GenerationSink {
 public:
  std::function<bool(int, const TokenOutput&)> on_each;
  bool on_token(int choice, const TokenOutput& t) override {
    std::lock_guard<std::mutex> lock(mutex);
    tokens[choice].push_back(t);
    return on_each ? on_each(choice, t) : true;
  }
  void on_choice_end(int choice, const GenerationResult& r) override {
    std::lock_guard<std::mutex> lock(mutex);
    finishes[choice] = r.finish;
  }
  void on_done(const std::string& error) override { done.set_value(error); }

  std::mutex mutex;
  std::map<int, std::vector<TokenOutput>> tokens;
  std::map<int, FinishReason> finishes;
  std::promise<std::string> done;
};

// A sink that holds the engine thread at its job's first token until `release` is set, so that
// later jobs queue up meanwhile; `started` is set once it holds.
struct Holder {
  std::promise<void> release, started;
  std::shared_future<void> gate = release.get_future().share();
  std::shared_ptr<RecordingSink> sink = std::make_shared<RecordingSink>();
  bool first = true;
  Holder() {
    sink->on_each = [this](int, const TokenOutput&) {
      if (first) {
        first = false;
        started.set_value();
        gate.wait();
      }
      return true;
    };
  }
};

// A one-token prompt: the fake's output depends on the last token only.
std::shared_ptr<InferenceJob> make_job(std::shared_ptr<RecordingSink> sink, int max_tokens, int n = 1) {
  return testing::job_of({1}, max_tokens, std::move(sink), n);
}

TEST(Engine, runs_a_job_and_reports_every_token) {
  ServerMetrics metrics;
  Engine worker("fake", std::make_unique<FakeModel>(), EngineOptions{4}, metrics.engine);
  auto sink = std::make_shared<RecordingSink>();
  auto done = sink->done.get_future();
  ASSERT_EQ(worker.submit(make_job(sink, 4)), Engine::Admit::accepted);
  EXPECT_EQ(done.get(), "");
  std::vector<int32_t> ids;
  for (const auto& t : sink->tokens[0]) ids.push_back(t.token);
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(sink->finishes[0], FinishReason::length);
}

TEST(Engine, full_queue_is_an_answer_not_a_wait) {
  ServerMetrics metrics;
  Holder hold;  // outlives the engine, which may still call its sink while stopping
  Engine worker("fake", std::make_unique<FakeModel>(), EngineOptions{2}, metrics.engine);
  ASSERT_EQ(worker.submit(make_job(hold.sink, 2)), Engine::Admit::accepted);
  hold.started.get_future().wait();  // the worker is busy; the queue is empty
  std::vector<std::shared_ptr<RecordingSink>> queued;
  for (int i = 0; i < 2; ++i) {
    queued.push_back(std::make_shared<RecordingSink>());
    ASSERT_EQ(worker.submit(make_job(queued.back(), 1)), Engine::Admit::accepted);
  }
  EXPECT_EQ(worker.queued(), 2u);
  EXPECT_EQ(worker.submit(make_job(std::make_shared<RecordingSink>(), 1)), Engine::Admit::queue_full);
  hold.release.set_value();
  for (auto& s : queued) EXPECT_EQ(s->done.get_future().get(), "");
}

TEST(Engine, cancel_stops_within_one_step) {
  ServerMetrics metrics;
  auto model = std::make_unique<FakeModel>();
  FakeModel* fake = model.get();
  Engine worker("fake", std::move(model), EngineOptions{4}, metrics.engine);
  auto sink = std::make_shared<RecordingSink>();
  auto job = make_job(sink, 1000);
  sink->on_each = [&](int, const TokenOutput&) {
    if (sink->tokens[0].size() == 3) job->cancelled = true;
    return true;
  };
  auto done = sink->done.get_future();
  worker.submit(job);
  done.get();
  EXPECT_EQ(sink->finishes[0], FinishReason::cancelled);
  EXPECT_LE(sink->tokens[0].size(), 4u);
  EXPECT_LE(fake->forwards.load(), 5);
}

TEST(Engine, sink_refusal_is_a_stop_not_a_cancel) {
  ServerMetrics metrics;
  Engine worker("fake", std::make_unique<FakeModel>(), EngineOptions{4}, metrics.engine);
  auto sink = std::make_shared<RecordingSink>();
  sink->on_each = [&](int, const TokenOutput& t) { return t.token != 3; };  // a stop string matched here
  auto done = sink->done.get_future();
  worker.submit(make_job(sink, 50));
  done.get();
  EXPECT_EQ(sink->finishes[0], FinishReason::stop);
  EXPECT_EQ(sink->tokens[0].size(), 2u);
}

TEST(Engine, n_choices_each_run_to_their_end) {
  ServerMetrics metrics;
  Engine worker("fake", std::make_unique<FakeModel>(), EngineOptions{4}, metrics.engine);
  auto sink = std::make_shared<RecordingSink>();
  auto done = sink->done.get_future();
  worker.submit(make_job(sink, 3, 3));
  done.get();
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(sink->tokens[c].size(), 3u) << c;
    EXPECT_EQ(sink->finishes[c], FinishReason::length) << c;
  }
}

TEST(Engine, n_choices_share_one_prefill) {
  ServerMetrics metrics;
  auto model = std::make_unique<FakeModel>();
  FakeModel* fake = model.get();
  Engine engine("fake", std::move(model), EngineOptions{4}, metrics.engine);
  auto sink = std::make_shared<RecordingSink>();
  auto job = make_job(sink, 4, 3);
  job->prompt = {1, 2, 3};
  auto done = sink->done.get_future();
  engine.submit(job);
  EXPECT_EQ(done.get(), "");
  EXPECT_EQ(fake->prompt_forwards.load(), 1);
  for (int c = 0; c < 3; ++c) {
    std::vector<int32_t> ids;
    for (const auto& t : sink->tokens[c]) ids.push_back(t.token);
    EXPECT_EQ(ids, (std::vector<int32_t>{4, 5, 6, 0})) << c;
  }
}

TEST(Engine, n_choices_of_zero_tokens_all_end) {
  ServerMetrics metrics;
  Engine engine("fake", std::make_unique<FakeModel>(), EngineOptions{4}, metrics.engine);
  auto sink = std::make_shared<RecordingSink>();
  auto done = sink->done.get_future();
  engine.submit(make_job(sink, 0, 3));
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(sink->finishes.size(), 3u);
}

TEST(Engine, concurrent_requests_share_forwards_up_to_max_seqs) {
  ServerMetrics metrics;
  auto model = std::make_unique<FakeModel>();
  FakeModel* fake = model.get();
  EngineOptions options;
  options.max_queue = 8;
  options.max_seqs = 3;
  Holder hold;  // outlives the engine, which may still call its sink while stopping
  Engine engine("fake", std::move(model), options, metrics.engine);
  ASSERT_EQ(engine.submit(make_job(hold.sink, 3)), Engine::Admit::accepted);
  hold.started.get_future().wait();  // the engine waits in the sink: the next jobs queue up
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 5; ++i) {
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_EQ(engine.submit(make_job(sinks.back(), 6)), Engine::Admit::accepted);
  }
  hold.release.set_value();
  for (auto& s : sinks) {
    EXPECT_EQ(s->done.get_future().get(), "");
    std::vector<int32_t> ids;
    for (const auto& t : s->tokens[0]) ids.push_back(t.token);
    EXPECT_EQ(ids, (std::vector<int32_t>{2, 3, 4, 5, 6, 0}));
  }
  EXPECT_EQ(fake->largest_batch.load(), 3);
}

TEST(Engine, logprobs_are_the_raw_log_softmax) {
  ServerMetrics metrics;
  Engine worker("fake", std::make_unique<FakeModel>(), EngineOptions{4}, metrics.engine);
  auto sink = std::make_shared<RecordingSink>();
  auto job = make_job(sink, 2);
  job->top_logprobs = 8;
  job->params.sampling.temperature = 0.0f;
  auto done = sink->done.get_future();
  worker.submit(job);
  done.get();
  for (const TokenOutput& t : sink->tokens[0]) {
    ASSERT_TRUE(t.has_logprobs);
    ASSERT_EQ(t.top.size(), 8u);
    EXPECT_EQ(t.top[0].first, t.token);
    EXPECT_FLOAT_EQ(t.top[0].second, t.logprob);
    double mass = 0;
    for (const auto& [id, lp] : t.top) mass += std::exp(static_cast<double>(lp));
    EXPECT_NEAR(mass, 1.0, 1e-5);
  }
}

TEST(Engine, stop_cancels_queued_jobs_and_ends_them) {
  ServerMetrics metrics;
  auto worker = std::make_unique<Engine>("fake", std::make_unique<FakeModel>(), EngineOptions{8}, metrics.engine);
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 4; ++i) {
    sinks.push_back(std::make_shared<RecordingSink>());
    worker->submit(make_job(sinks.back(), 100000));
  }
  worker->stop();
  for (auto& s : sinks) {
    auto f = s->done.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  }
  EXPECT_EQ(worker->submit(make_job(std::make_shared<RecordingSink>(), 1)), Engine::Admit::stopped);
}

}  // namespace
}  // namespace sanctum::server

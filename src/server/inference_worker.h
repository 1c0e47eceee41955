#pragma once
// One inference worker per loaded model: a thread that owns the model's compute and runs queued
// jobs one at a time. HTTP threads only submit jobs and read their output; nothing on the health,
// model-list or metrics paths ever waits on this queue.
//
// Idle work: on a hybrid model, each finished request leaves an end-of-generation snapshot to build
// (TailSnapshot: a prefill of prompt + output from the prompt's aligned snapshot), so that the next
// turn of the conversation hits the prompt cache past the previous answer. The worker runs it only
// while its queue is empty, after the request's response has been delivered, one aligned step (one
// forward of at most 64 tokens) at a time, and checks the queue between steps: a request that
// arrives waits for at most the step under way. Interrupted work stores what it has reached in the
// pool (the interrupting request is often the next turn and continues from there) and resumes when
// the queue is empty again, unless a longer snapshot of the same sequence has appeared meanwhile.
// The most recent kMaxPendingSnapshots finished requests are kept, newest first.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/cached_generation.h"
#include "engine/generator.h"
#include "engine/prefix_cache.h"
#include "model/model.h"
#include "server/server_metrics.h"

namespace sanctum::server {

// One generated token as the worker hands it out.
struct TokenOutput {
  int32_t token = 0;
  bool has_logprobs = false;
  float logprob = 0.0f;                        // log-softmax of the raw logits
  std::vector<std::pair<int32_t, float>> top;  // best first, top_logprobs entries
};

// Receives a job's output on the worker thread. Keep the calls short: the next token waits for them.
class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  // Return false to end this choice now (a stop string matched); the job's cancel flag is separate.
  virtual bool on_token(int choice, const TokenOutput& token) = 0;
  // `finish` is stop | length | cancelled (set when the sink ended the choice too: the sink knows why).
  virtual void on_choice_end(int choice, const GenerationResult& result) = 0;
  // The job is over: every choice ended, or `error` is set (an internal fault, already logged).
  virtual void on_done(const std::string& error) = 0;
};

struct InferenceJob {
  std::string request_id;
  std::vector<int32_t> prompt;
  GenerationParams params;
  int n = 1;
  bool seed_given = false;
  int top_logprobs = -1;  // -1: no logprobs; 0..20: the sampled token's logprob plus that many alternatives
  std::shared_ptr<GenerationSink> sink;
  std::atomic<bool> cancelled{false};  // the client went away or the server is shutting down
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
};

class InferenceWorker {
 public:
  // prompt_cache_bytes bounds the prompt-cache pool (0: no reuse across requests).
  InferenceWorker(std::string name, std::unique_ptr<Model> model, size_t max_queue, ServerMetrics& metrics, size_t prompt_cache_bytes = 0);
  ~InferenceWorker();
  InferenceWorker(const InferenceWorker&) = delete;
  InferenceWorker& operator=(const InferenceWorker&) = delete;

  enum class Admit { accepted, queue_full, stopped };
  // Never blocks: a full queue is an answer (429), not a wait.
  Admit submit(std::shared_ptr<InferenceJob> job);

  const std::string& name() const { return name_; }
  const Model& model() const { return *model_; }
  size_t queued() const;
  bool busy() const { return busy_.load(); }

  static constexpr size_t kMaxPendingSnapshots = 4;
  // Idle-work counters (tests and logs): requests whose snapshot is still to be built, aligned
  // steps run, and snapshots stored, so far.
  size_t pending_snapshots() const { return pending_count_.load(); }
  int64_t snapshot_steps() const { return snapshot_steps_.load(); }
  int64_t snapshots_built() const { return snapshots_built_.load(); }
  // The prompt cache's figures (all zero when it is off).
  PrefixCacheStats prompt_cache_stats() const;

  // Cancels what is queued and running, then joins the thread.
  void stop();

 private:
  void loop();
  void run(InferenceJob& job);
  // Cache-aware; the first choice's end-of-generation snapshot work goes to pending_snapshots_.
  GenerationResult run_choice(InferenceJob& job, int choice, GenerationParams& params, const TokenCallback& on_tokens);
  void idle_step();          // one aligned step of the newest pending snapshot work
  void set_pending_count();  // the count others read, and its gauge

  std::string name_;
  std::unique_ptr<Model> model_;
  size_t max_queue_;
  ServerMetrics& metrics_;
  Gauge& queue_gauge_;
  std::unique_ptr<PrefixCache> prompt_cache_;                    // null when disabled
  spec::SpeculationStats speculation_stats_;                     // what drafting costs on this model (worker thread only)
  std::deque<std::unique_ptr<TailSnapshot>> pending_snapshots_;  // newest first (worker thread only)
  std::atomic<size_t> pending_count_{0};
  std::atomic<int64_t> snapshot_steps_{0}, snapshots_built_{0};

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<InferenceJob>> queue_;
  std::shared_ptr<InferenceJob> running_;
  bool stopping_ = false;
  std::atomic<bool> busy_{false};
  std::thread thread_;
};

}  // namespace sanctum::server

#pragma once
// One engine per loaded model: a thread that owns the model's compute and runs every admitted
// request's sequences together. Each step the scheduler gathers the running sequences' work (decode
// tokens with their prompt-lookup drafts, then pieces of new prompts within the step's token budget:
// chunked prefill) into one batched forward (Model::forward_batch), hands each sequence its logits
// rows, and passes the tokens to the requests' sinks. HTTP threads only submit jobs and read their
// output; nothing on the health, model-list or metrics paths ever waits on the engine.
//
// A sequence alone (one running, nothing queued) steps alone instead, which keeps a GPU's device-side
// picks and chained steps; it checks for arrivals every kChainLimit tokens at most.
//
// Idle work: on a hybrid model, each finished request leaves an end-of-generation snapshot to build
// (TailSnapshot: a prefill of prompt + output from the prompt's aligned snapshot), so that the next
// turn of the conversation hits the prompt cache past the previous answer. The engine runs it only
// while nothing is queued or running, one aligned step at a time, and checks the queue between steps.
// Interrupted work stores what it has reached in the pool and resumes when the engine is idle again.
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
#include "engine/engine_metrics.h"
#include "engine/generator.h"
#include "engine/prefix_cache.h"
#include "model/model.h"
#include "model/vision/image_cache.h"

namespace sanctum {

// One generated token as the engine hands it out.
struct TokenOutput {
  int32_t token = 0;
  bool has_logprobs = false;
  float logprob = 0.0f;                        // log-softmax of the raw logits
  std::vector<std::pair<int32_t, float>> top;  // best first, top_logprobs entries
};

// Receives a job's output on the engine thread. Keep the calls short: every running sequence's next
// token waits for them. Choices of one job may interleave.
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

// An image in a job's prompt (vision-language models): the index of its first placeholder token, and
// its encoded rows, or the processor's output for the engine to encode at admission (the tower runs
// on the compute pool, which only the engine's thread drives), once per distinct `hash` in the job.
struct JobImage {
  int64_t offset = 0;
  int64_t token_count = 0;  // placeholders (with pixel values; embeddings know their own)
  std::shared_ptr<const ImageEmbeddings> embeddings;
  ImageHash hash{};
  std::shared_ptr<const std::vector<float>> pixel_values;  // (rows, cols) f32, the processor's layout
  int64_t rows = 0, cols = 0;
  GridThw grid;
  int64_t tokens() const { return embeddings ? embeddings->tokens() : token_count; }
};

struct InferenceJob {
  std::string request_id;
  std::vector<int32_t> prompt;
  // In prompt order. A job with images prefills through its last image at admission
  // (Model::forward_images); the prompt cache keys its placeholders by the images' content hashes.
  std::vector<JobImage> images;
  GenerationParams params;
  int n = 1;  // choices: n sequences that share the prompt's prefill
  bool seed_given = false;
  int top_logprobs = -1;  // -1: no logprobs; 0..20: the sampled token's logprob plus that many alternatives
  std::shared_ptr<GenerationSink> sink;
  // The adapter its sequences add per row ("model": "BASE:NAME"), null for the base model. Shared, so
  // an unload or replace while it runs leaves it on the adapter it started with.
  std::shared_ptr<const ServedLora> lora;
  std::atomic<bool> cancelled{false};  // the client went away or the server is shutting down
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
};

struct EngineOptions {
  size_t max_queue = 64;          // jobs waiting beyond the running batch; more get 429
  size_t prompt_cache_bytes = 0;  // the prompt-cache pool (0: no reuse across requests)
  int max_seqs = 16;              // sequences in the running batch
  int64_t max_batch_tokens = 0;   // tokens per forward step; 0: the model's prefill chunk
  size_t state_bytes = 0;         // bound on the running sequences' KV cache and recurrent state at
                                  // their longest (prompt + max_tokens); 0: none
  // The running sequences may also take the prompt cache's bytes: its bound shrinks (entries are
  // evicted) before a new sequence waits, and grows back as sequences end.
  bool cache_yields_to_state = false;
};

class Engine {
 public:
  Engine(std::string name, std::unique_ptr<Model> model, EngineOptions options, EngineMetrics& metrics);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  enum class Admit { accepted, queue_full, stopped };
  // Never blocks: a full queue is an answer (429), not a wait.
  Admit submit(std::shared_ptr<InferenceJob> job);

  const std::string& name() const { return name_; }
  const Model& model() const { return *model_; }
  const EngineOptions& options() const { return options_; }
  size_t queued() const;
  // The state (KV rows and recurrent state) the job holds at its longest, all choices: what
  // admission counts against EngineOptions::state_bytes. On the CPU the n choices of one request
  // share the prompt's KV pages (model/state.h), so it is counted once.
  size_t reserve_bytes(const InferenceJob& job) const { return reserve_bytes(job, job.n, {}, true, true); }
  size_t running() const { return running_count_.load(); }  // sequences in the batch
  bool busy() const { return running() > 0; }

  static constexpr size_t kMaxPendingSnapshots = 4;
  static constexpr int kChainLimit = 16;
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
  struct Job;
  struct Sequence;
  // Rows of a prompt-cache snapshot that a job's sequences continue: on the CPU they map its pages.
  struct CachedPrefix {
    uint64_t entry = 0;  // PrefixCache::Hit::entry (0: none)
    int64_t tokens = 0;
  };
  // reserve_bytes for `sequences` of the job's choices, continuing `cached`: with_prompt counts the
  // prompt rows its choices share (once per job), with_cached the snapshot's rows (once per snapshot
  // however many jobs continue it).
  size_t reserve_bytes(const InferenceJob& job, int sequences, const CachedPrefix& cached, bool with_prompt, bool with_cached) const;
  void loop();
  // hit: what admission found in the prompt cache for the job (restored as found), or none.
  void start(std::shared_ptr<InferenceJob> job, const PrefixCache::Hit& hit);
  void start_choice(const std::shared_ptr<Job>& job, int choice, const PrefixCache::Hit* hit = nullptr);
  static std::vector<int32_t> image_prompt_key(const InferenceJob& job);
  int64_t prefill_images(const InferenceJob& job, SequenceState& state, int64_t from, GenerationParams& params);
  void fork_choices(Sequence& parent);
  void step();
  void step_batch();
  void end_sequences();
  void end_sequence(Sequence& s);
  void fail(const std::shared_ptr<Job>& job, const std::string& error);
  void idle_step();
  void set_pending_count();
  void set_gauges();
  std::string name_;
  std::unique_ptr<Model> model_;
  EngineOptions options_;
  EngineMetrics& metrics_;
  Gauge& queue_gauge_;
  Gauge& running_gauge_;
  Gauge& state_bytes_gauge_;
  std::unique_ptr<PrefixCache> prompt_cache_;                    // null when disabled
  spec::SpeculationStats speculation_stats_;                     // what drafting costs on this model (engine thread only)
  std::deque<std::unique_ptr<TailSnapshot>> pending_snapshots_;  // newest first (engine thread only)
  std::atomic<size_t> pending_count_{0};
  std::atomic<int64_t> snapshot_steps_{0}, snapshots_built_{0};

  size_t fixed_state_bytes_ = 0;                      // a sequence's recurrent state (GatedDeltaNet layers)
  size_t kv_bytes_per_token_ = 0;                     // its KV rows per token (attention layers)
  bool kv_pages_shared_ = false;                      // a fork maps its parent's whole KV blocks instead of copying them
  int64_t kv_block_rows_ = 0;                         // rows a KV cache commits at a time (KvCache::commit_rows)
  std::vector<std::unique_ptr<Sequence>> sequences_;  // the running batch, in admission order (engine thread only)
  std::atomic<size_t> running_count_{0};
  std::vector<BatchEntry> entries_;  // step_batch's, reused
  std::vector<Sequence*> stepped_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<InferenceJob>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sanctum

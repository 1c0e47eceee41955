#include "server/inference_worker.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>

#include "base/error.h"
#include "base/log.h"

namespace sanctum::server {

InferenceWorker::InferenceWorker(std::string name, std::unique_ptr<Model> model, size_t max_queue, ServerMetrics& metrics,
                                 size_t prompt_cache_bytes)
    : name_(std::move(name)), model_(std::move(model)), max_queue_(max_queue), metrics_(metrics),
      queue_gauge_(metrics.queue_depth.with({name_})) {
  if (prompt_cache_bytes > 0) prompt_cache_ = std::make_unique<PrefixCache>(prompt_cache_bytes);
  thread_ = std::thread([this] { loop(); });
}

InferenceWorker::~InferenceWorker() { stop(); }

InferenceWorker::Admit InferenceWorker::submit(std::shared_ptr<InferenceJob> job) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return Admit::stopped;
  // Jobs whose clients left are dead weight: drop them before judging fullness.
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [](const auto& j) { return j->cancelled.load(); }), queue_.end());
  if (queue_.size() >= max_queue_) return Admit::queue_full;
  queue_.push_back(std::move(job));
  queue_gauge_.set(static_cast<double>(queue_.size()));
  wake_.notify_one();
  return Admit::accepted;
}

size_t InferenceWorker::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void InferenceWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    for (auto& job : queue_) job->cancelled = true;
    if (running_) running_->cancelled = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void InferenceWorker::loop() {
  for (;;) {
    std::shared_ptr<InferenceJob> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !pending_snapshots_.empty(); });
      if (queue_.empty() && stopping_) return;  // stopping with nothing left; pending idle work is dropped
      if (!queue_.empty()) {
        job = std::move(queue_.front());
        queue_.pop_front();
        queue_gauge_.set(static_cast<double>(queue_.size()));
        running_ = job;
      }
    }
    if (!job) {  // nothing queued: one step of idle work, then look at the queue again
      idle_step();
      continue;
    }
    // A request goes first: interrupted idle work keeps what it has built.
    if (!pending_snapshots_.empty()) {
      pending_snapshots_.front()->pause(*prompt_cache_);
      metrics_.prompt_cache_bytes.set(static_cast<double>(prompt_cache_->stats().bytes));
    }
    busy_ = true;
    if (job->cancelled) {
      GenerationResult none;
      none.finish = FinishReason::cancelled;
      job->sink->on_choice_end(0, none);
      job->sink->on_done("");
    } else {
      run(*job);
    }
    busy_ = false;
    std::lock_guard<std::mutex> lock(mutex_);
    running_.reset();
  }
}

void InferenceWorker::idle_step() {
  TailSnapshot& work = *pending_snapshots_.front();
  try {
    const int64_t forwards = work.forwards(), prefilled = work.prefilled();
    work.step(*model_, *prompt_cache_);
    snapshot_steps_ += work.forwards() - forwards;
    metrics_.tail_snapshot_tokens.inc(static_cast<double>(work.prefilled() - prefilled));
  } catch (const std::exception& e) {
    log::warn("end-of-generation snapshot failed", {{"model", name_}, {"error", e.what()}});
    pending_snapshots_.pop_front();
    set_pending_count();
    return;
  }
  if (!work.done()) return;
  if (work.stored()) {
    ++snapshots_built_;
    metrics_.tail_snapshots.inc();
    log::debug("end-of-generation snapshot stored", {{"model", name_}, {"tokens", std::to_string(work.target())}});
  }
  metrics_.prompt_cache_bytes.set(static_cast<double>(prompt_cache_->stats().bytes));
  pending_snapshots_.pop_front();
  set_pending_count();
}

void InferenceWorker::set_pending_count() {
  pending_count_ = pending_snapshots_.size();
  metrics_.tail_snapshots_pending.set(static_cast<double>(pending_count_.load()));
}

PrefixCacheStats InferenceWorker::prompt_cache_stats() const { return prompt_cache_ ? prompt_cache_->stats() : PrefixCacheStats{}; }

namespace {

// Log-softmax of one logits row, computed only for the tokens asked about.
struct LogitsSnapshot {
  std::vector<float> row;
  double log_sum_exp = 0.0;

  void take(std::span<const float> logits) {
    row.assign(logits.begin(), logits.end());
    float peak = *std::max_element(row.begin(), row.end());
    double sum = 0.0;
    for (float v : row) sum += std::exp(static_cast<double>(v - peak));
    log_sum_exp = static_cast<double>(peak) + std::log(sum);
  }
  float logprob(int32_t token) const { return static_cast<float>(row[static_cast<size_t>(token)] - log_sum_exp); }
  std::vector<std::pair<int32_t, float>> top(int k) const {
    std::vector<int32_t> ids(row.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    size_t kk = std::min(ids.size(), static_cast<size_t>(k));
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kk), ids.end(), [&](int32_t a, int32_t b) {
      float va = row[static_cast<size_t>(a)], vb = row[static_cast<size_t>(b)];
      return va > vb || (va == vb && a < b);
    });
    std::vector<std::pair<int32_t, float>> out;
    for (size_t i = 0; i < kk; ++i) out.emplace_back(ids[i], logprob(ids[i]));
    return out;
  }
};

// The rows of the tokens not yet handed over, oldest first: the generator shows one row per picked
// token, in order, but a prompt-lookup verification picks several tokens from one forward before
// any of them is handed over. Spent rows are kept for reuse (a row is the vocabulary's size).
class LogitsQueue {
 public:
  void push(std::span<const float> logits) {
    if (spare_.empty()) spare_.emplace_back();
    rows_.push_back(std::move(spare_.back()));
    spare_.pop_back();
    rows_.back().take(logits);
  }
  // The oldest row; null when none is waiting.
  const LogitsSnapshot* front() const { return rows_.empty() ? nullptr : &rows_.front(); }
  void pop() {
    spare_.push_back(std::move(rows_.front()));
    rows_.pop_front();
  }

 private:
  std::deque<LogitsSnapshot> rows_;
  std::vector<LogitsSnapshot> spare_;
};

const char* stop_reason_label(FinishReason f) { return finish_reason_name(f); }

}  // namespace

void InferenceWorker::run(InferenceJob& job) {
  const auto started = std::chrono::steady_clock::now();
  std::string error;
  std::random_device entropy;
  for (int choice = 0; choice < job.n && error.empty(); ++choice) {
    GenerationParams params = job.params;
    params.callback_every = 1;  // the sink batches stream writes; cancellation is checked every token
    if (job.seed_given) params.sampling.seed = job.params.sampling.seed + static_cast<uint64_t>(choice);
    else if (!params.sampling.greedy()) params.sampling.seed = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();

    LogitsQueue rows;
    if (job.top_logprobs >= 0) params.on_logits = [&](std::span<const float> logits) { rows.push(logits); };

    bool sink_stopped = false;
    auto on_tokens = [&](std::span<const int32_t> tokens) {
      if (job.cancelled.load(std::memory_order_relaxed)) return false;
      for (int32_t t : tokens) {
        TokenOutput out;
        out.token = t;
        if (const LogitsSnapshot* row = rows.front()) {
          out.has_logprobs = true;
          out.logprob = row->logprob(t);
          if (job.top_logprobs > 0) out.top = row->top(job.top_logprobs);
          rows.pop();
        }
        if (!job.sink->on_token(choice, out)) {
          sink_stopped = true;
          return false;
        }
      }
      return true;
    };

    GenerationResult result;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      result = run_choice(job, choice, params, on_tokens);
    } catch (const std::exception& e) {
      error = e.what();
      log::error("generation failed", {{"request_id", job.request_id}, {"model", name_}, {"error", e.what()}});
      metrics_.inference_requests.with({"error"}).inc();
      break;
    }
    // A sink that ended the choice matched a stop string: that is a normal stop, not a cancel.
    if (sink_stopped && result.finish == FinishReason::cancelled) result.finish = FinishReason::stop;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double n_tokens = static_cast<double>(result.tokens.size());
    metrics_.inference_requests.with({stop_reason_label(result.finish)}).inc();
    metrics_.pld_drafted_tokens.inc(static_cast<double>(result.drafted_tokens));
    metrics_.pld_accepted_tokens.inc(static_cast<double>(result.accepted_tokens));
    metrics_.completion_tokens_total.inc(n_tokens);
    metrics_.prompt_tokens_total.inc(static_cast<double>(result.prompt_tokens));
    metrics_.inference_duration.observe(seconds);
    if (n_tokens > 0) metrics_.completion_tokens.observe(n_tokens);
    if (result.tokens.size() > 1 && result.decode_seconds > 0) metrics_.tokens_per_sec.observe((n_tokens - 1) / result.decode_seconds);
    job.sink->on_choice_end(choice, result);
    if (result.finish == FinishReason::cancelled) break;
  }
  (void)started;
  job.sink->on_done(error);
}

GenerationResult InferenceWorker::run_choice(InferenceJob& job, int choice, GenerationParams& params, const TokenCallback& on_tokens) {
  int64_t reused = 0;
  params.speculation_stats = &speculation_stats_;
  std::unique_ptr<TailSnapshot> tail;
  GenerationResult result =
      generate_with_cache(*model_, prompt_cache_.get(), job.prompt, params, on_tokens, &reused, choice == 0 ? &tail : nullptr);
  if (prompt_cache_) {
    metrics_.prompt_cache_lookups.with({reused > 0 ? "hit" : "miss"}).inc();
    metrics_.prompt_cache_tokens.inc(static_cast<double>(reused));
    metrics_.prompt_cache_bytes.set(static_cast<double>(prompt_cache_->stats().bytes));
  }
  if (tail) {  // run once the queue is empty (loop), after this job's on_done
    pending_snapshots_.push_front(std::move(tail));
    if (pending_snapshots_.size() > kMaxPendingSnapshots) pending_snapshots_.pop_back();
    set_pending_count();
  }
  return result;
}

}  // namespace sanctum::server

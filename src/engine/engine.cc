#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <unordered_set>

#include "base/error.h"
#include "base/log.h"
#include "engine/memory_plan.h"
#include "engine/sequence_run.h"
#include "tensor/device_rows.h"
#include "tensor/host_rows.h"

namespace sanctum {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

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

// The rows of the tokens not yet handed over, oldest first: a sequence shows one row per picked
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

}  // namespace

// A request in the running batch: its choices start together (choice 0 prefills, the others fork
// from its prompt) and it is over when every started choice has ended.
struct Engine::Job {
  std::shared_ptr<InferenceJob> request;
  int started = 0, ended = 0;
  bool failed = false;
  CachedPrefix cached;  // what choice 0 was restored from
};

// One choice of a job: a sequence of the batch.
struct Engine::Sequence {
  std::shared_ptr<Job> job;
  int choice = 0;
  LogitsQueue rows;                           // logprobs: the raw rows of tokens not yet handed to the sink
  bool sink_stopped = false;                  // the sink ended the choice (a stop string): a stop, not a cancel
  std::unique_ptr<PromptCacheUse> cache_use;  // choice 0 with the prompt cache on
  std::optional<SequenceRun> run;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

Engine::Engine(std::string name, std::unique_ptr<Model> model, EngineOptions options, EngineMetrics& metrics)
    : name_(std::move(name)), model_(std::move(model)), options_(options), metrics_(metrics),
      queue_gauge_(metrics.queue_depth.with({name_})), running_gauge_(metrics.running_sequences.with({name_})),
      state_bytes_gauge_(metrics.state_bytes.with({name_})) {
  check(options_.max_seqs >= 1, ErrorKind::invalid_argument, "--max-seqs must be at least 1");
  if (options_.max_batch_tokens <= 0) options_.max_batch_tokens = model_->prefill_chunk();
  if (options_.prompt_cache_bytes > 0) prompt_cache_ = std::make_unique<PrefixCache>(options_.prompt_cache_bytes);
  const MemoryPlan plan = plan_memory(*model_, options_.state_bytes, options_.prompt_cache_bytes, options_.max_batch_tokens);
  fixed_state_bytes_ = plan.recurrent_per_sequence;
  kv_bytes_per_token_ = plan.kv_per_token;
  kv_block_rows_ = plan.kv_block_rows;
  kv_pages_shared_ = plan.kv_blocks_shared;
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { stop(); }

Engine::Admit Engine::submit(std::shared_ptr<InferenceJob> job) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return Admit::stopped;
  // Jobs whose clients left are dead weight: drop them before judging fullness.
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [](const auto& j) { return j->cancelled.load(); }), queue_.end());
  if (queue_.size() >= options_.max_queue) return Admit::queue_full;
  queue_.push_back(std::move(job));
  queue_gauge_.set(static_cast<double>(queue_.size()));
  wake_.notify_one();
  return Admit::accepted;
}

size_t Engine::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    for (auto& job : queue_) job->cancelled = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

PrefixCacheStats Engine::prompt_cache_stats() const { return prompt_cache_ ? prompt_cache_->stats() : PrefixCacheStats{}; }

void Engine::loop() {
  for (;;) {
    std::vector<std::pair<std::shared_ptr<InferenceJob>, PrefixCache::Hit>> arrivals;
    bool stopping = false;
    size_t cache_bound = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !sequences_.empty() || !pending_snapshots_.empty(); });
      stopping = stopping_;
      if (stopping && queue_.empty() && sequences_.empty()) return;  // pending idle work is dropped
      // Requests go first: interrupted idle work keeps what it has built, where admission's look into
      // the prompt cache below finds it.
      if (!queue_.empty() && !pending_snapshots_.empty()) {
        lock.unlock();
        pending_snapshots_.front()->pause(*prompt_cache_);
        metrics_.prompt_cache_bytes.set(static_cast<double>(prompt_cache_->stats().bytes));
        lock.lock();
      }
      // Sequences the running jobs hold or will hold (choices still to fork included), and their
      // state at its longest.
      int slots = 0;
      size_t reserved = 0;
      // Shared rows count once: a job's prompt rows (its choices map them), a snapshot's rows (every
      // sequence continuing it maps them).
      std::unordered_set<const InferenceJob*> jobs_counted;
      std::unordered_set<uint64_t> entries_counted;
      auto first_of = [&](uint64_t entry) { return entry != 0 && entries_counted.insert(entry).second; };
      for (const auto& s : sequences_) {
        const InferenceJob& job = *s->job->request;
        const int held = 1 + (s->choice == 0 ? job.n - s->job->started : 0);
        slots += held;
        const CachedPrefix& cached = s->job->cached;
        reserved += reserve_bytes(job, held, cached, jobs_counted.insert(&job).second, first_of(cached.entry));
      }
      // Admit while the batch has room for every choice of the next job, sequences and state bytes
      // at their longest (one job always fits an empty batch); the rest wait in the queue, in order.
      const size_t state_pool = options_.state_bytes + (options_.cache_yields_to_state && prompt_cache_ ? options_.prompt_cache_bytes : 0);
      auto fits = [&](const InferenceJob& job, size_t bytes) {
        if (slots == 0) return true;
        if (slots + job.n > options_.max_seqs) return false;
        return options_.state_bytes == 0 || reserved + bytes <= state_pool;
      };
      while (!queue_.empty()) {
        const InferenceJob& job = *queue_.front();
        // The prompt-cache entry it would continue, whose rows sequences continuing it already may
        // map: it starts from the entry found here (looked up here rather than at its start), even if
        // that is evicted before.
        PrefixCache::Hit hit;
        if (prompt_cache_ && !job.lora) {
          try {
            hit = prompt_cache_->find(job.images.empty() ? job.prompt : image_prompt_key(job));
          } catch (const std::exception&) {  // a malformed image layout: start() fails the job
          }
        }
        const CachedPrefix cached{hit.entry, hit.tokens};
        const size_t bytes = reserve_bytes(job, job.n, cached, true, cached.entry != 0 && !entries_counted.contains(cached.entry));
        if (!fits(job, bytes)) break;
        if (cached.entry != 0) entries_counted.insert(cached.entry);
        reserved += bytes;
        slots += job.n;
        arrivals.push_back({std::move(queue_.front()), std::move(hit)});
        queue_.pop_front();
      }
      queue_gauge_.set(static_cast<double>(queue_.size()));
      // What the running sequences may reach past their own bound comes out of the cache's.
      const size_t over = reserved > options_.state_bytes ? reserved - options_.state_bytes : 0;
      cache_bound = options_.prompt_cache_bytes - std::min(over, options_.prompt_cache_bytes);
    }
    if (options_.cache_yields_to_state && prompt_cache_ && options_.state_bytes > 0 && cache_bound != prompt_cache_->max_bytes()) {
      prompt_cache_->set_max_bytes(cache_bound);
      metrics_.prompt_cache_bytes.set(static_cast<double>(prompt_cache_->stats().bytes));
    }
    if (stopping)
      for (const auto& s : sequences_) s->job->request->cancelled = true;
    if (arrivals.empty() && sequences_.empty()) {  // nothing to run: one step of idle work
      idle_step();
      continue;
    }
    for (auto& [job, hit] : arrivals) start(std::move(job), hit);
    running_count_ = sequences_.size();
    step();
    set_gauges();
  }
}

void Engine::start(std::shared_ptr<InferenceJob> request, const PrefixCache::Hit& hit) {
  auto job = std::make_shared<Job>();
  job->request = std::move(request);
  if (job->request->cancelled) {
    GenerationResult none;
    none.finish = FinishReason::cancelled;
    job->request->sink->on_choice_end(0, none);
    job->request->sink->on_done("");
    return;
  }
  start_choice(job, 0, hit.snapshot ? &hit : nullptr);
}

namespace {
// The choice's sampling seed: the request's plus the choice index, or fresh entropy.
uint64_t choice_seed(const InferenceJob& job, int choice) {
  if (job.seed_given) return job.params.sampling.seed + static_cast<uint64_t>(choice);
  if (job.params.sampling.greedy()) return job.params.sampling.seed;
  std::random_device entropy;
  return (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
}
}  // namespace

void Engine::start_choice(const std::shared_ptr<Job>& job, int choice, const PrefixCache::Hit* hit) {
  const InferenceJob& request = *job->request;
  auto s = std::make_unique<Sequence>();
  s->job = job;
  s->choice = choice;
  Sequence* seq = s.get();
  GenerationParams params = request.params;
  params.callback_every = 1;  // the sink batches stream writes; cancellation is checked every token
  params.speculation_stats = &speculation_stats_;
  params.sampling.seed = choice_seed(request, choice);
  if (request.top_logprobs >= 0) params.on_logits = [seq](std::span<const float> logits) { seq->rows.push(logits); };
  TokenCallback on_tokens = [seq](std::span<const int32_t> tokens) {
    const InferenceJob& r = *seq->job->request;
    if (r.cancelled.load(std::memory_order_relaxed)) return false;
    for (int32_t t : tokens) {
      TokenOutput out;
      out.token = t;
      if (const LogitsSnapshot* row = seq->rows.front()) {
        out.has_logprobs = true;
        out.logprob = row->logprob(t);
        if (r.top_logprobs > 0) out.top = row->top(r.top_logprobs);
        seq->rows.pop();
      }
      if (!r.sink->on_token(seq->choice, out)) {
        seq->sink_stopped = true;
        return false;
      }
    }
    return true;
  };
  ++job->started;
  try {
    if (choice == 0) {
      SequenceState state;
      // The prompt cache holds base-model states only: a prefix computed with an adapter is never
      // reused for another adapter or the base, nor the other way round.
      PrefixCache* cache = request.lora ? nullptr : prompt_cache_.get();
      const std::vector<int32_t> key = request.images.empty() ? request.prompt : image_prompt_key(request);
      s->cache_use = std::make_unique<PromptCacheUse>(*model_, cache, key, state, params, cache != nullptr ? hit : nullptr);
      state.set_lora(request.lora);
      const int64_t reused = s->cache_use->reused();
      job->cached = {s->cache_use->restored_from(), reused};
      if (cache) {
        metrics_.prompt_cache_lookups.with({reused > 0 ? "hit" : "miss"}).inc();
        metrics_.prompt_cache_tokens.inc(static_cast<double>(reused));
      }
      const int64_t done = request.images.empty() ? reused : prefill_images(request, state, reused, params);
      s->run.emplace(*model_, std::move(state), std::vector<int32_t>(request.prompt.begin() + done, request.prompt.end()), params,
                     on_tokens);
      if (request.n > 1) s->run->keep_prompt_row();
    } else {
      const Sequence* parent = nullptr;
      for (const auto& other : sequences_)
        if (other->job == job && other->choice == 0) parent = other.get();
      check(parent != nullptr, ErrorKind::internal, "choice " + std::to_string(choice) + " has no prefilled choice 0 to start from");
      s->run.emplace(parent->run->fork(params, on_tokens));
    }
  } catch (const std::exception& e) {
    fail(job, e.what());
    return;
  }
  s->run->limit_chained_steps(kChainLimit);
  sequences_.push_back(std::move(s));
}

// The prompt-cache key of a job with images: each image's placeholders keyed by its content.
std::vector<int32_t> Engine::image_prompt_key(const InferenceJob& job) {
  std::vector<int32_t> key = job.prompt;
  for (const JobImage& image : job.images) {
    check(image.offset >= 0 && image.offset + image.tokens() <= static_cast<int64_t>(key.size()), ErrorKind::invalid_argument,
          "a job image's placeholders lie outside its prompt");
    for (int64_t j = 0; j < image.tokens(); ++j) key[static_cast<size_t>(image.offset + j)] = PrefixCache::image_key(image.hash, j);
  }
  return key;
}

// A job's prompt from `from` (what the prompt cache gave) through its last image: the images' rows in
// place of their placeholders, at their multimodal positions, in forwards of at most a prefill chunk,
// split at the snapshot positions the prompt cache asked for (params.snapshot_at, which it leaves to
// the run past there).
// Only images from `from` on go through the tower. Returns the tokens the state then holds; at least
// one is left for the run, whose first logits row it needs.
int64_t Engine::prefill_images(const InferenceJob& job, SequenceState& state, int64_t from, GenerationParams& params) {
  const JobImage& last = job.images.back();
  const int64_t through = last.offset + last.tokens();
  check(through < static_cast<int64_t>(job.prompt.size()), ErrorKind::invalid_argument,
        "a prompt must go on past its last image (the chat template closes it with a vision end token)");
  if (from >= through) return from;
  ImageEmbeddingCache encoded(*model_);                            // the job's images, one tower run per distinct content
  std::vector<std::pair<int64_t, const ImageEmbeddings*>> images;  // (offset in the prompt, rows)
  for (const JobImage& image : job.images) {
    if (image.offset + image.tokens() <= from) continue;
    if (image.embeddings) {
      images.emplace_back(image.offset, image.embeddings.get());
      continue;
    }
    check(image.pixel_values != nullptr, ErrorKind::invalid_argument, "a job image has neither embeddings nor pixel values");
    images.emplace_back(image.offset, &encoded.get(image.hash, *image.pixel_values, image.rows, image.cols, image.grid));
  }
  std::vector<int64_t> cuts;
  std::vector<int64_t> later;  // snapshot positions the run reaches
  for (int64_t p : params.snapshot_at) (p > from && p <= through ? cuts : later).push_back(p);
  // Pieces of at most a prefill chunk bound the forward's scratch, as a text prompt's pieces do.
  const int64_t chunk = std::max(1, params.prefill_chunk > 0 ? params.prefill_chunk : model_->prefill_chunk());
  for (int64_t p = from + chunk; p < through; p += chunk) cuts.push_back(p);
  cuts.push_back(through);
  std::ranges::sort(cuts);
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  int64_t begin = from;
  for (int64_t end : cuts) {
    std::vector<PromptImage> placed;
    for (const auto& [offset, rows] : images)
      if (offset < end && offset + rows->tokens() > begin) placed.push_back({offset - begin, rows});
    const auto piece = std::span<const int32_t>(job.prompt).subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
    model_->forward_images(piece, state, LogitsFor::none, placed);
    if (params.on_snapshot && std::ranges::find(params.snapshot_at, end) != params.snapshot_at.end()) params.on_snapshot(state);
    begin = end;
  }
  params.snapshot_at = std::move(later);
  return through;
}

// Choices 1.. of a job start once choice 0 has prefilled the prompt.
void Engine::fork_choices(Sequence& parent) {
  const std::shared_ptr<Job> job = parent.job;
  if (parent.choice != 0 || job->failed || !parent.run->prompt_row_ready()) return;
  while (job->started < job->request->n && !job->failed) start_choice(job, job->started);
}

void Engine::step() {
  for (const auto& s : sequences_)
    if (s->job->request->cancelled.load(std::memory_order_relaxed)) s->run->cancel();
  end_sequences();
  if (sequences_.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  if (sequences_.size() == 1 && queued() == 0) {
    // Alone: the model's own fast path (device picks, chained steps on a GPU).
    Sequence& s = *sequences_.front();
    const bool prefilling = s.run->prefilling();
    try {
      s.run->step_alone(*model_);
    } catch (const std::exception& e) {
      fail(s.job, e.what());
    }
    if (!prefilling) metrics_.batch_sequences.observe(1);
    fork_choices(s);
  } else {
    step_batch();
  }
  metrics_.step_seconds.observe(seconds_since(t0));
  end_sequences();
}

void Engine::step_batch() {
  entries_.clear();
  stepped_.clear();
  int64_t budget = options_.max_batch_tokens;
  auto add = [&](Sequence& s, const SequenceRun::Step& step) {
    if (step.tokens.empty()) return;
    entries_.push_back({step.tokens, &s.run->state(), step.which});
    stepped_.push_back(&s);
    budget -= static_cast<int64_t>(step.tokens.size());
  };
  // Running sequences' decode steps first, whatever the budget; then pieces of new prompts in the
  // room left, oldest first, so a long prompt delays the streams by at most one piece per step.
  for (const auto& s : sequences_)
    if (!s->run->done() && !s->run->prefilling()) add(*s, s->run->plan(0));
  for (const auto& s : sequences_)
    if (!s->run->done() && s->run->prefilling() && budget > 0) add(*s, s->run->plan(budget));
  if (entries_.empty()) return;

  const auto t0 = std::chrono::steady_clock::now();
  Tensor logits;
  try {
    logits = model_->forward_batch(entries_);
  } catch (const std::exception& e) {
    for (Sequence* s : stepped_) fail(s->job, e.what());
    return;
  }
  const double seconds = seconds_since(t0);
  int64_t at = 0, rows_in = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const int64_t count = Model::row_count(entries_[i]);
    rows_in += static_cast<int64_t>(entries_[i].tokens.size());
    Sequence& s = *stepped_[i];
    try {
      s.run->take(count > 0 ? logits.slice(0, at, at + count) : Tensor{}, seconds);
    } catch (const std::exception& e) {
      fail(s.job, e.what());
    }
    at += count;
  }
  metrics_.batch_sequences.observe(static_cast<double>(entries_.size()));
  metrics_.batch_tokens.observe(static_cast<double>(rows_in));
  for (Sequence* s : stepped_) fork_choices(*s);
}

// Ends the finished sequences (and drops those of failed jobs), keeping the rest in order.
void Engine::end_sequences() {
  for (auto& s : sequences_)
    if (!s->job->failed && s->run->done()) end_sequence(*s);
  std::erase_if(sequences_, [](const std::unique_ptr<Sequence>& s) { return s->job->failed || s->run->done(); });
}

void Engine::end_sequence(Sequence& s) {
  Job& job = *s.job;
  const InferenceJob& request = *job.request;
  GenerationResult result = s.run->result();
  result.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  if (s.cache_use) {
    std::unique_ptr<TailSnapshot> tail;
    try {
      s.cache_use->finish(result, s.run->state(), &tail);
    } catch (const std::exception& e) {
      log::warn("prompt-cache store failed", {{"request_id", request.request_id}, {"model", name_}, {"error", e.what()}});
    }
    if (tail) {  // run once the engine is idle (loop), after this job's on_done
      pending_snapshots_.push_front(std::move(tail));
      if (pending_snapshots_.size() > kMaxPendingSnapshots) pending_snapshots_.pop_back();
      set_pending_count();
    }
    if (prompt_cache_) metrics_.prompt_cache_bytes.set(static_cast<double>(prompt_cache_->stats().bytes));
  }
  // A sink that ended the choice matched a stop string: that is a normal stop, not a cancel.
  if (s.sink_stopped && result.finish == FinishReason::cancelled) result.finish = FinishReason::stop;
  const double n_tokens = static_cast<double>(result.tokens.size());
  metrics_.inference_requests.with({finish_reason_name(result.finish)}).inc();
  metrics_.pld_drafted_tokens.inc(static_cast<double>(result.drafted_tokens));
  metrics_.pld_accepted_tokens.inc(static_cast<double>(result.accepted_tokens));
  metrics_.completion_tokens_total.inc(n_tokens);
  metrics_.prompt_tokens_total.inc(static_cast<double>(result.prompt_tokens));
  metrics_.inference_duration.observe(seconds_since(s.started));
  if (n_tokens > 0) metrics_.completion_tokens.observe(n_tokens);
  if (result.tokens.size() > 1 && result.decode_seconds > 0) metrics_.tokens_per_sec.observe((n_tokens - 1) / result.decode_seconds);
  request.sink->on_choice_end(s.choice, result);
  ++job.ended;
  if (s.choice == 0 && !s.run->prompt_row_ready() && result.finish != FinishReason::cancelled) {
    // Ended before its prefill (max_tokens 0): the other choices, which would fork from it, end the same way.
    for (; job.started < request.n; ++job.started, ++job.ended) request.sink->on_choice_end(job.started, result);
  }
  // Choices that never started (the job was cancelled before choice 0's prefill ended) never will.
  const bool no_more = job.started == request.n || request.cancelled.load() || result.finish == FinishReason::cancelled;
  if (job.ended == job.started && no_more) {
    job.started = request.n;  // none start later
    request.sink->on_done("");
  }
}

void Engine::fail(const std::shared_ptr<Job>& job, const std::string& error) {
  if (job->failed) return;
  job->failed = true;
  log::error("generation failed", {{"request_id", job->request->request_id}, {"model", name_}, {"error", error}});
  metrics_.inference_requests.with({"error"}).inc();
  job->request->sink->on_done(error);
}

void Engine::idle_step() {
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

size_t Engine::reserve_bytes(const InferenceJob& job, int sequences, const CachedPrefix& cached, bool with_prompt, bool with_cached) const {
  // KV rows grow in blocks (KvCache::commit_rows).
  const int64_t block = kv_block_rows_;
  const auto prompt = static_cast<int64_t>(job.prompt.size());
  const int64_t rows = (prompt + std::max(0, job.params.max_tokens) + block - 1) / block * block;
  // Whole blocks that sequences map rather than copy (pages and granules are no larger than a block
  // for any row of a real layer): the rows of a cached snapshot that each sequence continuing it maps, and the
  // prompt's rows that the choices of one request map from the first. Each sequence holds the rest.
  const int64_t from_cache = kv_pages_shared_ && cached.entry != 0 ? std::min(cached.tokens, prompt) / block * block : 0;
  const int64_t from_prompt = kv_pages_shared_ && job.n > 1 ? prompt / block * block : 0;
  const int64_t shared = std::max(from_cache, from_prompt);
  const auto kv = [&](int64_t r) { return kv_bytes_per_token_ * static_cast<size_t>(r); };
  return (with_prompt ? kv(shared - from_cache) : 0) + (with_cached ? kv(from_cache) : 0) +
         static_cast<size_t>(sequences) * (fixed_state_bytes_ + kv(rows - shared));
}

void Engine::set_pending_count() {
  pending_count_ = pending_snapshots_.size();
  metrics_.tail_snapshots_pending.set(static_cast<double>(pending_count_.load()));
}

void Engine::set_gauges() {
  running_count_ = sequences_.size();
  running_gauge_.set(static_cast<double>(sequences_.size()));
  // Shared KV buffers (prompt-cache hits, forks) counted once.
  std::unordered_set<const void*> seen;
  size_t bytes = 0;
  for (const auto& s : sequences_)
    s->run->state().for_each_buffer([&](const void* id, size_t b) {
      if (id == nullptr || seen.insert(id).second) bytes += b;
    });
  state_bytes_gauge_.set(static_cast<double>(bytes));
  metrics_.kv_page_bytes.set(static_cast<double>(HostRows::allocated_bytes()));
  metrics_.kv_shared_page_bytes.set(static_cast<double>(HostRows::duplicate_mapped_bytes()));
  metrics_.kv_gpu_granule_bytes.set(static_cast<double>(DeviceRows::allocated_bytes()));
  metrics_.kv_gpu_shared_granule_bytes.set(static_cast<double>(DeviceRows::duplicate_mapped_bytes()));
}

}  // namespace sanctum

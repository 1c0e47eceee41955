#include "cli/generate_batch.h"

#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/metrics_registry.h"
#include "cli/ids.h"
#include "engine/engine.h"

namespace sanctum::cli {

namespace {

int setting(const std::string& key, const std::string& value) {
  try {
    size_t used = 0;
    const long v = std::stol(value, &used);
    check(used == value.size() && v >= 0 && v <= (1 << 24), ErrorKind::invalid_argument, "");
    return static_cast<int>(v);
  } catch (const std::exception&) {
    throw Error(ErrorKind::invalid_argument, "prompts file: " + key + "=" + value + " is not a count in 0..16777216");
  }
}

// Collects one job's tokens; the client "goes away" after cancel_after tokens.
class CollectingSink : public GenerationSink {
 public:
  CollectingSink(int n, int cancel_after, std::atomic<bool>* cancelled)
      : tokens_(static_cast<size_t>(n)), cancel_after_(cancel_after), cancelled_(cancelled) {}
  bool on_token(int choice, const TokenOutput& token) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& t = tokens_[static_cast<size_t>(choice)];
    t.push_back(token.token);
    if (choice == 0 && cancel_after_ >= 0 && static_cast<int>(t.size()) >= cancel_after_) *cancelled_ = true;
    return true;
  }
  void on_choice_end(int choice, const GenerationResult& result) override {
    std::lock_guard<std::mutex> lock(mutex_);
    results_[choice] = result;
  }
  void on_done(const std::string& error) override { done_.set_value(error); }

  std::future<std::string> future() { return done_.get_future(); }
  std::string line() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    for (size_t c = 0; c < tokens_.size(); ++c) out += (c ? " | " : "") + format_ids(tokens_[c]);
    return out;
  }
  std::map<int, GenerationResult> results() {
    std::lock_guard<std::mutex> lock(mutex_);
    return results_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::vector<int32_t>> tokens_;
  std::map<int, GenerationResult> results_;
  int cancel_after_;
  std::atomic<bool>* cancelled_;
  std::promise<std::string> done_;
};

}  // namespace

BatchPrompt parse_batch_line(const std::string& line) {
  BatchPrompt p;
  const size_t bar = line.find('|');
  p.ids = parse_ids(line.substr(0, bar));
  if (bar == std::string::npos) return p;
  std::string rest = line.substr(bar + 1);
  size_t at = 0;
  while (at <= rest.size()) {
    const size_t comma = std::min(rest.find(',', at), rest.size());
    const std::string item = rest.substr(at, comma - at);
    at = comma + 1;
    if (item.find_first_not_of(" \t\r") == std::string::npos) continue;
    const size_t eq = item.find('=');
    check(eq != std::string::npos, ErrorKind::invalid_argument, "prompts file: '" + item + "' is not KEY=VALUE");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "max_tokens") p.max_tokens = setting(key, value);
    else if (key == "n") p.n = std::max(1, setting(key, value));
    else if (key == "cancel_after") p.cancel_after = setting(key, value);
    else if (key == "delay_ms") p.delay_ms = setting(key, value);
    else throw Error(ErrorKind::invalid_argument, "prompts file: unknown setting '" + key + "' (max_tokens, n, cancel_after, delay_ms)");
  }
  return p;
}

void run_batched(std::unique_ptr<Model> model, const std::vector<BatchPrompt>& prompts, const GenerationParams& params, int max_seqs,
                 size_t prompt_cache_bytes, bool timing) {
  Registry registry;
  EngineMetrics metrics(registry);
  EngineOptions options;
  options.max_queue = prompts.size() + 1;
  options.prompt_cache_bytes = prompt_cache_bytes;
  options.max_seqs = max_seqs;
  options.max_batch_tokens = params.prefill_chunk;
  Engine engine("generate", std::move(model), options, metrics);

  std::vector<std::shared_ptr<InferenceJob>> jobs;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  std::vector<std::future<std::string>> done;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const BatchPrompt& p = prompts[i];
    if (p.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(p.delay_ms));
    auto job = std::make_shared<InferenceJob>();
    job->request_id = "prompt-" + std::to_string(i);
    job->prompt = p.ids;
    job->params = params;
    job->params.sampling.seed = params.sampling.seed + i;
    job->seed_given = true;
    if (p.max_tokens >= 0) job->params.max_tokens = p.max_tokens;
    job->n = p.n;
    auto sink = std::make_shared<CollectingSink>(p.n, p.cancel_after, &job->cancelled);
    job->sink = sink;
    done.push_back(sink->future());
    check(engine.submit(job) == Engine::Admit::accepted, ErrorKind::internal, "the engine refused prompt " + std::to_string(i));
    jobs.push_back(std::move(job));
    sinks.push_back(std::move(sink));
  }
  int64_t generated = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string error = done[i].get();
    check(error.empty(), ErrorKind::internal, "prompt " + std::to_string(i) + ": " + error);
    std::printf("%s\n", sinks[i]->line().c_str());
    for (const auto& [choice, r] : sinks[i]->results()) {
      generated += static_cast<int64_t>(r.tokens.size());
      if (timing)
        std::fprintf(stderr, "prompt %zu choice %d: %zu generated; drafted %lld, accepted %lld; finish=%s\n", i, choice, r.tokens.size(),
                     static_cast<long long>(r.drafted_tokens), static_cast<long long>(r.accepted_tokens), finish_reason_name(r.finish));
    }
  }
  if (timing) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "%lld tokens generated in %.3f s (%.1f tok/s over all sequences, up to %d at once)\n",
                 static_cast<long long>(generated), seconds, static_cast<double>(generated) / seconds, max_seqs);
  }
  engine.stop();
}

}  // namespace sanctum::cli

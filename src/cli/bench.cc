// sanctum bench: prompt-processing and generation throughput, llama-bench style.
// --pp N: prefill N tokens into an empty state (repeatable), in forwards of --prefill-chunk tokens (by
// default the model's, as serve and generate use). --tg N: decode N tokens one by one after a prompt of
// --decode-context tokens. Each test runs --repetitions times after one warm-up; mean and stddev
// (and, in --json, each run's tok/s).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/thread_pool.h"
#include "cli/adapter_flags.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/device_flags.h"
#include "engine/memory_plan.h"
#include "model/model.h"
#include "ops/kv_format.h"
#include "ops/precision.h"
#include "tensor/device_memory.h"

namespace sanctum::cli {
namespace {

const char* kUsage =
    "usage: sanctum bench --model DIR [--pp N ...] [--prefill-chunk N] [--tg N] [--decode-context N] [--repetitions R]\n"
    "                     [--threads N] [--matmul-precision f32|int8|bf16] [--device cpu|cuda] [--gpu-memory-limit-mb N]\n"
    "                     [--kv-cache-dtype f32|bf16|q8|q4v]\n"
    "                     [--memory-bandwidth] [--host-logits] [--json] [--adapter DIR] [--lora DIR]\n"
    "  --adapter          merges a LoRA / DoRA adapter (mlx-lm or PEFT format) into the weights at load.\n"
    "  --lora DIR         also times decode with the adapter unmerged, added per row (as serve --lora\n"
    "                     runs it): a second row, tgN+lora, beside the base's.\n"
    "  --prefill-chunk    prompt tokens per forward (default: the model's, 512 on the CPU, 4096 on a GPU).\n"
    "  --host-logits      decode copies each step's logits row to the host, even where generation picks\n"
    "                     tokens on the device (a GPU: there a greedy pick runs and only its id comes back).\n"
    "  --memory-bandwidth measures streaming read bandwidth (cpu) or device copy bandwidth, read +\n"
    "                     written bytes (cuda), and reports decode as a fraction of weight bytes / bandwidth.\n";

struct Stat {
  double mean = 0, stddev = 0;
};

Stat stats(const std::vector<double>& v) {
  Stat s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(s.stddev / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(std::min<int64_t>(vocab, 1 << 30) - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = dist(rng);
  return t;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Streaming read bandwidth of this machine with the compute pool (GB/s): sums a buffer much larger
// than the caches, best of several passes.
double measure_read_bandwidth() {
  const size_t n = size_t{1} << 28;  // 1 GiB of floats
  std::vector<float> buf(n, 1.0f);
  ThreadPool& pool = compute_pool();
  std::vector<double> partial(static_cast<size_t>(pool.size()));
  double best = 0.0;
  for (int pass = 0; pass < 5; ++pass) {
    double t0 = now();
    pool.run_on_all([&](int t) {
      size_t b = n * static_cast<size_t>(t) / static_cast<size_t>(pool.size());
      size_t e = n * static_cast<size_t>(t + 1) / static_cast<size_t>(pool.size());
      float acc[16] = {};
      for (size_t i = b; i + 16 <= e; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] += buf[i + static_cast<size_t>(j)];
      double sum = 0;
      for (float a : acc) sum += a;
      partial[static_cast<size_t>(t)] = sum;
    });
    double s = now() - t0;
    best = std::max(best, static_cast<double>(n * sizeof(float)) / s / 1e9);
  }
  return best;
}

// The adapter the timed sequences add per row (--lora), null for the base.
std::shared_ptr<const ServedLora> bench_lora;

double time_prefill(Model& model, const std::vector<int32_t>& tokens, size_t chunk) {
  SequenceState state = model.new_state();
  state.set_lora(bench_lora);
  const std::span<const int32_t> all(tokens);
  double t0 = now();
  for (size_t begin = 0; begin < all.size(); begin += chunk) {
    const size_t end = std::min(all.size(), begin + chunk);
    model.forward(all.subspan(begin, end - begin), state, end == all.size() ? LogitsFor::last : LogitsFor::none);
  }
  return now() - t0;
}

// Decodes n tokens one forward at a time, each step as generation runs it: with pick (where the model
// picks tokens on its device, a GPU) a greedy pick runs there and only the id comes back; otherwise
// the step's logits row comes back to the host, whose sampler is not timed. The tokens fed come from
// a fixed list, except where the model chains its steps (Model::chains_picks): there, as in
// generation, each step after the first is fed the token the one before picked, and is queued
// before the host reads that token.
double time_decode(Model& model, const std::vector<int32_t>& context, const std::vector<int32_t>& tokens, bool pick) {
  SequenceState state = model.new_state();
  state.set_lora(bench_lora);
  if (!context.empty()) model.forward(context, state, LogitsFor::last);
  const TokenPick greedy;
  double t0 = now();
  if (pick && model.chains_picks() && !tokens.empty()) {
    model.queue_pick(tokens[0], state, greedy);
    for (size_t i = 1; i < tokens.size(); ++i) {
      model.queue_pick(Model::kPickedToken, state, greedy);
      model.next_pick();
    }
    model.next_pick();
    return now() - t0;
  }
  for (int32_t token : tokens) {
    const int32_t one[1] = {token};
    if (pick) model.forward_pick(one, state, LogitsFor::last, greedy);
    else model.forward(one, state, LogitsFor::last);
  }
  return now() - t0;
}

int run_bench(int argc, char** argv) {
  Args args(argc, argv,
            {"model", "pp", "prefill-chunk", "tg", "decode-context", "repetitions", "threads", "matmul-precision", kKvCacheDtypeFlag,
             kDeviceFlag, kTuneFlag, kGpuMemoryLimitFlag, kAdapterFlag, kLoraFlag},
            {"json", "help", "memory-bandwidth", "host-logits"});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  check(args.has("model"), ErrorKind::invalid_argument, std::string("--model DIR is required\n") + kUsage);
  if (args.has("threads")) set_compute_threads(static_cast<int>(args.get_int("threads", 0)));
  if (args.has("matmul-precision")) ops::set_matmul_precision(ops::parse_matmul_precision(*args.get("matmul-precision")));
  const Device device = apply_device_flags(args);
  const int reps = static_cast<int>(args.get_int("repetitions", 3));
  check(reps >= 1, ErrorKind::invalid_argument, "--repetitions must be >= 1");
  const double bandwidth = !args.has("memory-bandwidth") ? 0.0
                           : device == Device::cuda      ? device_memory::cuda_copy_bandwidth() / 1e9
                                                         : measure_read_bandwidth();
  std::vector<int64_t> pp;
  for (const auto& v : args.get_all("pp")) pp.push_back(std::stoll(v));
  if (pp.empty()) pp.push_back(512);
  const int64_t n_gen = args.get_int("tg", 128);
  const int64_t decode_context = args.get_int("decode-context", 0);

  double t_load = now();
  auto model = load_model(*args.get("model"), device, tuning_from_flags(args), nullptr, adapter_from_flags(args));
  t_load = now() - t_load;
  const int64_t vocab = model->vocab_size();
  const bool picks_on_device = model->picks_on_device() && !args.has("host-logits");  // decode as generation runs it
  const int64_t chunk = args.get_int("prefill-chunk", model->prefill_chunk());
  check(chunk >= 1, ErrorKind::invalid_argument, "--prefill-chunk must be >= 1");
  const double weight_gb = static_cast<double>(model->weight_bytes_per_token()) / 1e9;
  const std::shared_ptr<const ServedLora> lora = lora_from_flags(args, *model);

  nlohmann::json results = nlohmann::json::array();
  auto report = [&](const std::string& test, int64_t tokens, const std::vector<double>& seconds) {
    std::vector<double> tps;
    for (double s : seconds) tps.push_back(static_cast<double>(tokens) / s);
    Stat st = stats(tps);
    nlohmann::json r = {{"test", test}, {"tokens", tokens},    {"tokens_per_second", st.mean},    {"stddev", st.stddev},
                        {"runs", tps},  {"repetitions", reps}, {"threads", compute_pool().size()}};
    if (test.rfind("tg", 0) == 0) {
      r["weight_gb_per_second"] = st.mean * weight_gb;
      if (bandwidth > 0) r["fraction_of_bandwidth_floor"] = st.mean * weight_gb / bandwidth;
    }
    results.push_back(r);
    if (!args.has("json")) {
      std::printf("%-10s %8.2f ± %6.2f tok/s", test.c_str(), st.mean, st.stddev);
      if (test.rfind("tg", 0) == 0) std::printf("  (%.2f GB/s of weights)", st.mean * weight_gb);
      std::printf("\n");
    }
  };

  for (int64_t n : pp) {
    auto tokens = random_tokens(n, vocab, 42);
    time_prefill(*model, tokens, static_cast<size_t>(chunk));  // warm-up
    std::vector<double> s;
    for (int r = 0; r < reps; ++r) s.push_back(time_prefill(*model, tokens, static_cast<size_t>(chunk)));
    report("pp" + std::to_string(n), n, s);
  }
  if (n_gen > 0) {
    auto context = random_tokens(decode_context, vocab, 7);
    auto tokens = random_tokens(n_gen, vocab, 9);
    time_decode(*model, context, {tokens.begin(), tokens.begin() + std::min<int64_t>(n_gen, 8)}, picks_on_device);  // warm-up
    std::vector<double> s, with;
    for (int r = 0; r < reps; ++r) {
      s.push_back(time_decode(*model, context, tokens, picks_on_device));
      if (!lora) continue;
      // Alternated with the base's runs, so that load from elsewhere falls on both alike.
      bench_lora = lora;
      with.push_back(time_decode(*model, context, tokens, picks_on_device));
      bench_lora = nullptr;
    }
    std::string name = "tg" + std::to_string(n_gen);
    if (decode_context > 0) {
      name += '@';  // appended piecewise: GCC 12 reports a false -Wrestrict on "@" + std::string
      name += std::to_string(decode_context);
    }
    report(name, n_gen, s);
    if (lora) report(name + "+lora", n_gen, with);  // the same steps with the adapter's low-rank terms added
  }
  if (args.has("json")) {
    nlohmann::json out = {{"model", *args.get("model")},
                          {"model_type", model->config().model_type},
                          {"load_seconds", t_load},
                          {"weight_bytes_per_token", model->weight_bytes_per_token()},
                          {"threads", compute_pool().size()},
                          {"prefill_chunk", chunk},
                          {"results", results},
                          {"matmul_precision", ops::matmul_precision_name(ops::matmul_precision())},
                          {"kv_cache_dtype", ops::kv_cache_dtype_name(ops::kv_cache_dtype())},
                          {"device", device_name(device)},
                          {"decode_picks_on_device", picks_on_device}};
    // The plan serve would make for one sequence as long as this run's longest (the plan's parts,
    // to set beside the process's peak RSS).
    const int64_t longest = std::max(pp.empty() ? 0 : *std::max_element(pp.begin(), pp.end()), decode_context + n_gen);
    MemoryPlan plan = plan_memory(*model, 0, 0, chunk);
    plan.state_bound = plan.kv_per_token * static_cast<size_t>(longest) + plan.recurrent_per_sequence;
    out["memory_plan"] = plan.to_json();
    out["memory_plan"]["sequence_tokens"] = longest;
    if (device == Device::cuda) out["gpu_memory_peak_bytes"] = device_memory::cuda_memory_peak();
    if (bandwidth > 0) out["memory_read_gb_per_second"] = bandwidth;
    std::printf("%s\n", out.dump(2).c_str());
  }
  return 0;
}

SubcommandRegistration reg("bench", "prefill / decode throughput benchmark", run_bench);

}  // namespace
}  // namespace sanctum::cli

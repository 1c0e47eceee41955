// Time of one decode step of a batch of B sequences (Model::forward_batch, one token each), the
// step a continuously batched server runs: B rows through every projection in one matmul.
// Build: bench/kernels/build_batch_step.sh [build dir].
// Run: batch_step_bench MODEL_DIR [threads] [rows,rows,...] [steps] [context]  (int8 matmuls, CPU;
// the KV cache in bf16 as the command-line tools keep it, or as SANCTUM_KV_CACHE_DTYPE names)
// Prints, per row count, the median and min ms per step over `steps` steps after a `context`-token
// prompt (default 24) and 4 warm-up steps, the aggregate tokens per second the median gives, and the
// median CPU time of the process per step (all threads; on a shared machine it moves less than the
// wall time, since time spent descheduled is not in it). Long contexts show what attention over the
// cache costs beside the projections.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/model.h"
#include "ops/kv_format.h"
#include "ops/precision.h"

using namespace sanctum;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

std::vector<int> parse_rows(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) out.push_back(std::stoi(part));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: batch_step_bench MODEL_DIR [threads] [rows,rows,...] [steps] [context]\n");
    return 2;
  }
  if (argc > 2) set_compute_threads(std::atoi(argv[2]));
  const std::vector<int> row_counts = parse_rows(argc > 3 ? argv[3] : "1,2,4,8,16");
  const int steps = argc > 4 ? std::atoi(argv[4]) : 16;
  const int context = argc > 5 ? std::atoi(argv[5]) : 24;
  ops::set_matmul_precision(ops::MatmulPrecision::int8);
  if (!ops::kv_cache_dtype_chosen()) ops::set_kv_cache_dtype(ops::KvCacheDtype::bf16);
  auto model = load_model(argv[1]);
  const int64_t vocab = model->vocab_size();
  uint32_t seed = 12345;
  auto next_token = [&] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<int32_t>(seed % static_cast<uint32_t>(vocab));
  };
  // One prefill for every sequence: each starts from its snapshot (KV rows copied on its first
  // write) and then diverges by its own random tokens, so a 4k context costs one prompt, not B.
  std::shared_ptr<const SequenceState> prefilled;
  {
    SequenceState first = model->new_state();
    std::vector<int32_t> prompt(static_cast<size_t>(context));
    for (auto& t : prompt) t = next_token();
    model->forward(prompt, first, LogitsFor::last);
    prefilled = first.snapshot();
  }
  for (int rows : row_counts) {
    std::vector<SequenceState> states;
    for (int i = 0; i < rows; ++i) {
      states.push_back(model->new_state());
      states.back().restore(*prefilled);
    }
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(rows));
    std::vector<double> ms, cpu_ms;
    for (int step = 0; step < steps + 4; ++step) {
      std::vector<BatchEntry> batch;
      for (int i = 0; i < rows; ++i) {
        tokens[static_cast<size_t>(i)] = {next_token()};
        batch.push_back({tokens[static_cast<size_t>(i)], &states[static_cast<size_t>(i)], LogitsFor::last});
      }
      const double t0 = now_s(), c0 = cpu_s();
      model->forward_batch(batch);
      if (step >= 4) {
        ms.push_back((now_s() - t0) * 1e3);
        cpu_ms.push_back((cpu_s() - c0) * 1e3);
      }
    }
    std::sort(ms.begin(), ms.end());
    std::sort(cpu_ms.begin(), cpu_ms.end());
    const double median = ms[ms.size() / 2];
    std::printf("rows %2d  context %5d  median %7.2f ms/step  min %7.2f ms  -> %7.1f tok/s aggregate  cpu %7.2f ms/step\n", rows, context,
                median, ms.front(), rows * 1e3 / median, cpu_ms[cpu_ms.size() / 2]);
    std::fflush(stdout);
  }
  return 0;
}

// Time of one decode step of a batch of B sequences (Model::forward_batch, one token each), the
// step a continuously batched server runs: B rows through every projection in one matmul.
// Build: bench/kernels/build_batch_step.sh [build dir].
// Run: batch_step_bench MODEL_DIR [threads] [rows,rows,...] [steps]  (int8 matmuls, CPU)
// Prints, per row count, the median and min ms per step over `steps` steps after a 24-token prefill
// of each sequence and 4 warm-up steps, and the aggregate tokens per second the median gives.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/model.h"
#include "ops/precision.h"

using namespace sanctum;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<int> parse_rows(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) out.push_back(std::stoi(part));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: batch_step_bench MODEL_DIR [threads] [rows,rows,...] [steps]\n");
    return 2;
  }
  if (argc > 2) set_compute_threads(std::atoi(argv[2]));
  const std::vector<int> row_counts = parse_rows(argc > 3 ? argv[3] : "1,2,4,8,16");
  const int steps = argc > 4 ? std::atoi(argv[4]) : 16;
  ops::set_matmul_precision(ops::MatmulPrecision::int8);
  auto model = load_model(argv[1]);
  const int64_t vocab = model->vocab_size();
  for (int rows : row_counts) {
    std::vector<SequenceState> states;
    for (int i = 0; i < rows; ++i) states.push_back(model->new_state());
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(rows));
    uint32_t seed = 12345;
    auto next_token = [&] {
      seed = seed * 1664525u + 1013904223u;
      return static_cast<int32_t>(seed % static_cast<uint32_t>(vocab));
    };
    for (int i = 0; i < rows; ++i) {
      std::vector<int32_t> prompt(24);
      for (auto& t : prompt) t = next_token();
      model->forward(prompt, states[static_cast<size_t>(i)], LogitsFor::last);
    }
    std::vector<double> ms;
    for (int step = 0; step < steps + 4; ++step) {
      std::vector<BatchEntry> batch;
      for (int i = 0; i < rows; ++i) {
        tokens[static_cast<size_t>(i)] = {next_token()};
        batch.push_back({tokens[static_cast<size_t>(i)], &states[static_cast<size_t>(i)], LogitsFor::last});
      }
      const double t0 = now_s();
      model->forward_batch(batch);
      if (step >= 4) ms.push_back((now_s() - t0) * 1e3);
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    std::printf("rows %2d  median %7.2f ms/step  min %7.2f ms  -> %7.1f tok/s aggregate\n", rows, median, ms.front(), rows * 1e3 / median);
    std::fflush(stdout);
  }
  return 0;
}

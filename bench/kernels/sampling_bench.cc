// The host's token pick per row at the Qwen vocabulary (151,936 ids): greedy, then each sampling
// filter a request can ask for, on logits of a trained model's spread (normal, sd 3) and on a flat
// row (sd 0.05, where top-p keeps most ids). The engine runs this once per sequence per step on its
// own thread, so its cost adds to every decode step of every stream.
// Build: bench/kernels/build.sh [build dir]. Run: sampling_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "ops/ref/sampling.h"
#include "ops/sampling.h"

using namespace sanctum;

int main() {
  constexpr size_t kVocab = 151936;
  struct Case {
    const char* name;
    ops::RowSampling s;
  };
  const Case cases[] = {{"temperature 0.7", {0.7f, 1.0f, 0, 0.0f}},
                        {"temperature 0.7, top_p 0.8", {0.7f, 0.8f, 0, 0.0f}},
                        {"temperature 0.7, top_p 0.8, top_k 20", {0.7f, 0.8f, 20, 0.0f}},
                        {"temperature 1, min_p 0.05", {1.0f, 1.0f, 0, 0.05f}}};
  for (float spread : {3.0f, 0.05f}) {
    std::vector<float> logits(kVocab);
    std::mt19937 gen(1);
    std::normal_distribution<float> dist(0.0f, spread);
    for (float& x : logits) x = dist(gen);
    std::printf("logits ~ N(0, %g):\n", spread);
    auto time_ms = [](auto&& pick) {
      double best = 1e9;
      for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 4; ++i) pick();
        best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 4);
      }
      return best;
    };
    int32_t sink = 0;
    std::printf("  %-40s %7.3f ms\n", "greedy (argmax)", time_ms([&] { sink += ops::ref::argmax_row(logits); }));
    for (const Case& c : cases) std::printf("  %-40s %7.3f ms\n", c.name, time_ms([&] { sink += ops::ref::sample_row(logits, c.s, 0.5); }));
    std::printf("  (checksum %d)\n", sink);
  }
}

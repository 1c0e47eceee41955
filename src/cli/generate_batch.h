#pragma once
// `generate --prompts-file F --parallel N`: the prompts go through the server's engine, up to N
// sequences per forward, each submitted after its line's delay, so that batched and solo runs of the
// same prompts can be compared (tests/engine/test_batching.py).
//
// A line is comma-separated prompt ids, optionally followed by `|` and per-line settings:
//   max_tokens=K   this prompt's limit instead of --max-tokens
//   n=C            C choices sharing the prompt's prefill (output: choices joined by " | ")
//   cancel_after=K the client goes away after its K-th token (choice 0)
//   delay_ms=D     submitted D ms after the previous line (default 0)
#include <cstdint>
#include <string>
#include <vector>

#include "engine/generator.h"
#include "model/model.h"

namespace sanctum::cli {

struct BatchPrompt {
  std::vector<int32_t> ids;
  int max_tokens = -1;  // -1: the run's
  int n = 1;
  int cancel_after = -1;  // -1: never
  int delay_ms = 0;
};

// Parses one prompts-file line (the format above); throws sanctum::Error naming the bad part.
BatchPrompt parse_batch_line(const std::string& line);

// Runs every prompt through an Engine with `max_seqs` sequences per forward and prints one line per
// prompt in file order. `params` as for generate (prompt i samples with seed + i, choice c of it with
// seed + i + c); `prompt_cache_bytes` 0: no prompt cache.
void run_batched(std::unique_ptr<Model> model, const std::vector<BatchPrompt>& prompts, const GenerationParams& params, int max_seqs,
                 size_t prompt_cache_bytes, bool timing);

}  // namespace sanctum::cli

#pragma once
// The job the engine tests submit: a prompt, up to max_tokens tokens (EOS ignored, so the count is
// known), n choices, into a sink.
#include <memory>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace sanctum::server::testing {

inline std::shared_ptr<InferenceJob> job_of(std::vector<int32_t> prompt, int max_tokens, std::shared_ptr<GenerationSink> sink, int n = 1) {
  auto job = std::make_shared<InferenceJob>();
  job->prompt = std::move(prompt);
  job->params.max_tokens = max_tokens;
  job->params.ignore_eos = true;
  job->n = n;
  job->sink = std::move(sink);
  return job;
}

}  // namespace sanctum::server::testing

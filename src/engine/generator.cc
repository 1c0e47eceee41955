#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

namespace sanctum {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
  }
  return "stop";
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

GenerationResult generate(Model& model, SequenceState& state, std::span<const int32_t> prompt, const GenerationParams& params,
                          const TokenCallback& on_tokens) {
  check(!prompt.empty(), ErrorKind::invalid_argument, "generate: the prompt is empty");
  check(params.max_tokens >= 0, ErrorKind::invalid_argument, "generate: max_tokens must be >= 0");
  const int64_t vocab = model.vocab_size();
  for (int32_t id : prompt)
    check(id >= 0 && id < vocab, ErrorKind::invalid_argument,
          "prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");

  GenerationResult result;
  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (params.max_tokens == 0) return result;

  std::vector<int32_t> stops = params.stop_ids;
  if (!params.ignore_eos) stops.insert(stops.end(), model.config().eos_token_ids.begin(), model.config().eos_token_ids.end());
  auto is_stop = [&](int32_t t) { return std::find(stops.begin(), stops.end(), t) != stops.end(); };

  Sampler sampler(params.sampling);
  RecentTokens recent(params.sampling.penalty_window);
  if (params.sampling.has_penalties())
    for (int32_t t : prompt) recent.push(t);

  auto t0 = std::chrono::steady_clock::now();
  Tensor logits;
  const size_t chunk = static_cast<size_t>(std::max(1, params.prefill_chunk));
  for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
    size_t end = std::min(prompt.size(), begin + chunk);
    logits = model.forward(prompt.subspan(begin, end - begin), state, end == prompt.size() ? LogitsFor::last : LogitsFor::none);
  }

  std::vector<int32_t> pending;  // tokens not yet handed to the callback
  const size_t every = static_cast<size_t>(std::max(1, params.callback_every));
  auto flush = [&]() {
    if (pending.empty() || !on_tokens) {
      pending.clear();
      return true;
    }
    bool go_on = on_tokens(pending);
    pending.clear();
    return go_on;
  };

  auto t_decode = t0;
  for (int i = 0; i < params.max_tokens; ++i) {
    std::span<float> row(logits.data<float>(), static_cast<size_t>(vocab));
    if (params.on_logits) params.on_logits(row);
    int32_t token = sampler.sample(row, recent);
    if (i == 0) {
      result.prefill_seconds = seconds_since(t0);
      t_decode = std::chrono::steady_clock::now();
    }
    result.tokens.push_back(token);
    pending.push_back(token);
    if (params.sampling.has_penalties()) recent.push(token);
    if (is_stop(token)) {
      result.finish = FinishReason::stop;
      break;
    }
    if (pending.size() >= every && !flush()) {
      result.finish = FinishReason::cancelled;
      break;
    }
    if (i + 1 == params.max_tokens) break;  // no forward for a token we will not sample
    const int32_t one[1] = {token};
    logits = model.forward(one, state, LogitsFor::last);
  }
  if (result.finish != FinishReason::cancelled) flush();  // generation already ended: its reason stands
  result.decode_seconds = seconds_since(t_decode);
  return result;
}

}  // namespace sanctum

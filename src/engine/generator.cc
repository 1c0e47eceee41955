#include "engine/generator.h"

#include "engine/sequence_run.h"

namespace sanctum {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
  }
  return "stop";
}

GenerationResult generate(Model& model, SequenceState& state, std::span<const int32_t> prompt, const GenerationParams& params,
                          const TokenCallback& on_tokens) {
  SequenceRun run(model, std::move(state), std::vector<int32_t>(prompt.begin(), prompt.end()), params, on_tokens);
  while (!run.done()) run.step_alone(model);
  state = std::move(run.state());
  return run.result();
}

}  // namespace sanctum

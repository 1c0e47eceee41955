#pragma once
// The interface every architecture implements. A Model owns its weights (views into the mapped
// checkpoint) and per-call scratch; one inference worker drives it at a time.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "model/config.h"
#include "model/state.h"
#include "tensor/tensor.h"

namespace sanctum {

enum class LogitsFor { last, all, none };

class Model {
 public:
  virtual ~Model() = default;
  const ModelConfig& config() const { return config_; }
  int64_t vocab_size() const { return config_.vocab_size; }

  // A fresh, empty state for one sequence.
  virtual SequenceState new_state() const = 0;

  // Runs `tokens` (positions state.length() ..) through the model, extends the state, and returns
  // logits (rows, vocab) f32 for the last token, for every token, or none (rows = 0). The returned
  // tensor is scratch owned by the model, valid until the next forward.
  virtual Tensor forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which) = 0;

  // Bytes of weights one decode step reads (for bandwidth accounting).
  virtual size_t weight_bytes_per_token() const = 0;

 protected:
  explicit Model(ModelConfig config) : config_(std::move(config)) {}
  ModelConfig config_;
};

// Loads the checkpoint in `dir` with the architecture its config.json names, with weights, scratch
// and state on `device` (logits always come back to the host). Throws sanctum::Error
// (unsupported model_type names the ones that load; cuda without a GPU says why).
std::unique_ptr<Model> load_model(const std::string& dir, Device device = Device::cpu);

}  // namespace sanctum

#pragma once
// Dense pre-norm decoder (Llama family): embed → [RMSNorm → attention → +, RMSNorm → SiLU MLP → +] × L
// → RMSNorm → lm_head (or the tied embedding). qwen2 and mistral are this with different options.
#include <memory>

#include "model/model.h"
#include "weights/checkpoint.h"

namespace sanctum {

std::unique_ptr<Model> make_qwen2(ModelConfig config, Checkpoint& checkpoint);
std::unique_ptr<Model> make_mistral(ModelConfig config, Checkpoint& checkpoint);

}  // namespace sanctum

#pragma once
// Architectures built from the shared decoder (model/decoder.h): each is a tensor-naming and
// options table plus a factory registered in model/registry.cc.
#include <memory>

#include "model/model.h"
#include "weights/checkpoint.h"

namespace sanctum {

std::unique_ptr<Model> make_qwen2(ModelConfig config, Checkpoint& checkpoint);
std::unique_ptr<Model> make_mistral(ModelConfig config, Checkpoint& checkpoint);
std::unique_ptr<Model> make_mixtral(ModelConfig config, Checkpoint& checkpoint);
std::unique_ptr<Model> make_qwen3_5(ModelConfig config, Checkpoint& checkpoint);

// Every layer standard attention + dense (or MoE) FFN, when the config declared no layer types.
void fill_uniform_layers(ModelConfig& config, FfnKind ffn);

}  // namespace sanctum

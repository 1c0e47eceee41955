#pragma once
// model_type -> architecture. One line per architecture in registry.cc.
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "weights/checkpoint.h"

namespace sanctum {

using ArchFactory = std::unique_ptr<Model> (*)(ModelConfig config, Checkpoint& checkpoint);

struct ArchEntry {
  const char* model_type;
  ArchFactory make;
};

const std::vector<ArchEntry>& architectures();
std::string supported_model_types();  // "mistral, qwen2"

}  // namespace sanctum

#pragma once
// --adapter DIR for the subcommands that load one model (generate, bench, logits): a LoRA / DoRA
// adapter (mlx-lm or PEFT format) merged into the weights at load. --lora DIR (logits, bench): the
// same adapter kept apart and added per row (model/blocks/row_lora.h), as serve --lora runs it.
#include <memory>

#include "cli/args.h"
#include "model/blocks/row_lora.h"
#include "model/model.h"
#include "weights/adapters/lora_adapter.h"

namespace sanctum::cli {

inline constexpr const char* kAdapterFlag = "adapter";
inline constexpr const char* kAdapterUsage = "[--adapter DIR]";

// The adapter --adapter names, read and checked (LoraAdapter::load), or null without the flag.
std::shared_ptr<const LoraAdapter> adapter_from_flags(const Args& args);

inline constexpr const char* kLoraFlag = "lora";
// The adapter --lora names, bound to `model` for the per-row path, or null without the flag.
std::shared_ptr<const ServedLora> lora_from_flags(const Args& args, const Model& model);

}  // namespace sanctum::cli

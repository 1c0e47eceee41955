#pragma once
// --adapter DIR for the subcommands that load one model (generate, bench, logits): a LoRA / DoRA
// adapter (mlx-lm or PEFT format) merged into the weights at load.
#include <memory>

#include "cli/args.h"
#include "weights/adapters/lora_adapter.h"

namespace sanctum::cli {

inline constexpr const char* kAdapterFlag = "adapter";
inline constexpr const char* kAdapterUsage = "[--adapter DIR]";

// The adapter --adapter names, read and checked (LoraAdapter::load), or null without the flag.
std::shared_ptr<const LoraAdapter> adapter_from_flags(const Args& args);

}  // namespace sanctum::cli

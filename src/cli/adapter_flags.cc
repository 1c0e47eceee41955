#include "cli/adapter_flags.h"

#include "base/error.h"

namespace sanctum::cli {

std::shared_ptr<const LoraAdapter> adapter_from_flags(const Args& args) {
  if (!args.has(kAdapterFlag)) return nullptr;
  return LoraAdapter::load(*args.get(kAdapterFlag));
}

std::shared_ptr<const ServedLora> lora_from_flags(const Args& args, const Model& model) {
  if (!args.has(kLoraFlag)) return nullptr;
  check(!args.has(kAdapterFlag), ErrorKind::invalid_argument,
        "--lora and --adapter: give one (--lora keeps it apart, --adapter merges it)");
  return model.bind_lora("lora", LoraAdapter::load(*args.get(kLoraFlag)), int64_t{1} << 20);
}

}  // namespace sanctum::cli

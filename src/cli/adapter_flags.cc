#include "cli/adapter_flags.h"

namespace sanctum::cli {

std::shared_ptr<const LoraAdapter> adapter_from_flags(const Args& args) {
  if (!args.has(kAdapterFlag)) return nullptr;
  return LoraAdapter::load(*args.get(kAdapterFlag));
}

}  // namespace sanctum::cli

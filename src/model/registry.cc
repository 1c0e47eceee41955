#include "model/registry.h"

#include "base/error.h"
#include "base/log.h"
#include "model/arch/llama_like.h"
#include "tensor/device_memory.h"

namespace sanctum {

const std::vector<ArchEntry>& architectures() {
  static const std::vector<ArchEntry> table = {
      {"mistral", make_mistral},     {"mixtral", make_mixtral},          {"qwen2", make_qwen2},          {"qwen3_5", make_qwen3_5},
      {"qwen3_5_moe", make_qwen3_5}, {"qwen3_5_moe_text", make_qwen3_5}, {"qwen3_5_text", make_qwen3_5},
  };
  return table;
}

std::string supported_model_types() {
  std::string s;
  for (const auto& a : architectures()) {
    if (!s.empty()) s += ", ";
    s += a.model_type;
  }
  return s;
}

std::unique_ptr<Model> load_model(const std::string& dir, Device device, const Tuning& tuning, const PinnedFiles* verified,
                                  std::shared_ptr<const LoraAdapter> adapter) {
  if (device == Device::cuda)
    check(device_memory::cuda_available(), ErrorKind::unsupported, "--device cuda: " + device_memory::cuda_unavailable_reason());
  ModelConfig config = load_model_config(dir);
  config.device = device;
  config.tuning = tuning;
  for (const auto& a : architectures()) {
    if (config.model_type != a.model_type) continue;
    Checkpoint checkpoint(dir, verified);
    config.checkpoint_bytes = checkpoint.file_bytes();
    checkpoint.set_device(device);
    checkpoint.set_tuning(tuning);
    if (adapter) checkpoint.attach_adapter(std::move(adapter));
    auto model = a.make(std::move(config), checkpoint);
    checkpoint.check_all_used();
    return model;
  }
  fail(ErrorKind::unsupported,
       dir + "/config.json: model_type '" + config.model_type + "' is not supported; supported model types: " + supported_model_types());
}

}  // namespace sanctum

// Fuzzes adapter_config.json parsing (mlx-lm and PEFT) and the per-module questions the loader then
// asks of it (targets, rank, scale with its rank_pattern / alpha_pattern / target_modules regexes):
// arbitrary text must yield an AdapterConfig or sanctum::Error, never a crash or a foreign exception.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "weights/adapters/adapter_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (sanctum::AdapterFormat format : {sanctum::AdapterFormat::mlx_lm, sanctum::AdapterFormat::peft}) {
    try {
      const sanctum::AdapterConfig c = sanctum::parse_adapter_config(text, "adapter_config.json", format);
      if (c.rank <= 0) std::abort();
      for (const char* module : {"model.layers.3.self_attn.q_proj", "language_model.model.layers.0.linear_attn.in_proj_qkv", "lm_head"}) {
        std::string why;
        (void)c.targets(module, 4, &why);
        if (c.rank_for(module) <= 0) std::abort();
        (void)c.scale_for(module);
      }
    } catch (const sanctum::Error&) {
    }
  }
  return 0;
}

// Fuzzes the config.json / generation_config.json parser: arbitrary text must yield a ModelConfig or
// sanctum::Error, never a crash or a foreign exception. The input splits at the first NUL byte into
// config.json and generation_config.json.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string config = all.substr(0, nul);
  const std::string gen = nul == std::string::npos ? std::string() : all.substr(nul + 1);
  try {
    sanctum::ModelConfig c = sanctum::parse_model_config(config, gen);
    if (c.layers.size() != static_cast<size_t>(c.num_hidden_layers)) std::abort();
    if (c.rope.rotary_dim <= 0 || c.rope.rotary_dim > c.rope.head_dim) std::abort();
    if (c.head_dim <= 0 || c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0) std::abort();
    (void)c.quant.for_layer("model.layers.0.mlp.gate");
  } catch (const sanctum::Error&) {
  }
  return 0;
}

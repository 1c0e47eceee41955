#include "weights/quant_config.h"

#include "base/error.h"

namespace sanctum {

namespace {

using nlohmann::json;

int int_field(const json& block, const std::string& where, const char* key, int fallback) {
  auto it = block.find(key);
  if (it == block.end() || it->is_null()) return fallback;
  check(it->is_number_integer(), ErrorKind::invalid_input, where + "." + key + " must be an integer, got " + it->type_name());
  const bool in_range = it->is_number_unsigned() ? it->get<uint64_t>() <= 1024 : it->get<int64_t>() > 0 && it->get<int64_t>() <= 1024;
  check(in_range, ErrorKind::invalid_input, where + "." + key + " = " + it->dump() + " is out of range");
  const int64_t v = it->get<int64_t>();
  return static_cast<int>(v);
}

QuantParams parse_params(const json& block, const std::string& where, QuantParams fallback) {
  QuantParams p;
  p.bits = int_field(block, where, "bits", fallback.bits);
  p.group_size = int_field(block, where, "group_size", fallback.group_size);
  auto mode = block.find("mode");
  if (mode != block.end() && !mode->is_null()) {
    check(mode->is_string(), ErrorKind::invalid_input, where + ".mode must be a string, got " + mode->type_name());
    check(mode->get_ref<const std::string&>() == "affine", ErrorKind::unsupported,
          where + ".mode '" + mode->get<std::string>() + "' is not supported (only MLX 'affine' quantization)");
  }
  check(p.bits == 4 || p.bits == 8, ErrorKind::unsupported, where + ".bits = " + std::to_string(p.bits) + " is not supported (4 or 8)");
  check(p.group_size == 32 || p.group_size == 64 || p.group_size == 128, ErrorKind::unsupported,
        where + ".group_size = " + std::to_string(p.group_size) + " is not supported (32, 64 or 128)");
  return p;
}

}  // namespace

QuantParams QuantConfig::for_layer(const std::string& prefix) const {
  if (!quantized()) return {};
  std::string key = prefix;
  // Accept a tensor name as well as a module path.
  if (per_layer.find(key) == per_layer.end() && key.size() > 7 && key.compare(key.size() - 7, 7, ".weight") == 0) {
    key.resize(key.size() - 7);
  }
  auto it = per_layer.find(key);
  if (it == per_layer.end()) return defaults;
  return it->second ? *it->second : QuantParams{};
}

QuantConfig QuantConfig::from_json(const json& config) {
  QuantConfig q;
  if (!config.is_object()) return q;
  const char* key = "quantization";
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) {
    key = "quantization_config";
    it = config.find(key);
  }
  if (it == config.end() || it->is_null()) return q;
  const std::string where = std::string("config.json: ") + key;
  check(it->is_object(), ErrorKind::invalid_input, where + " must be an object, got " + it->type_name());
  const json& block = *it;

  // Hugging Face quantizers (GPTQ, AWQ, FP8, ...) name themselves; MLX blocks do not.
  auto method = block.find("quant_method");
  if (method != block.end() && !method->is_null()) {
    const std::string m = method->is_string() ? method->get<std::string>() : method->dump();
    check(m == "mlx" || m == "affine", ErrorKind::unsupported,
          where + ".quant_method '" + m + "' is not supported (only MLX affine 4/8-bit checkpoints load)");
  }
  check(block.contains("bits") || block.contains("group_size"), ErrorKind::invalid_input, where + " has neither 'bits' nor 'group_size'");
  // mlx-lm's defaults for affine mode when a field is left out.
  q.defaults = parse_params(block, where, QuantParams{4, 64});

  for (auto e = block.begin(); e != block.end(); ++e) {
    const std::string& name = e.key();
    if (name == "bits" || name == "group_size" || name == "mode" || name == "quant_method") continue;
    const std::string at = where + "['" + name + "']";
    if (e->is_boolean()) {
      q.per_layer[name] = e->get<bool>() ? std::optional<QuantParams>(q.defaults) : std::nullopt;
    } else if (e->is_object()) {
      q.per_layer[name] = parse_params(*e, at, q.defaults);
    } else {
      fail(ErrorKind::invalid_input, at + " must be false or an object {bits, group_size}, got " + e->type_name());
    }
  }
  return q;
}

}  // namespace sanctum

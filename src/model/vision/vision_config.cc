#include "model/vision/vision_config.h"

#include <cmath>

#include "base/error.h"

namespace sanctum {

namespace {
using nlohmann::json;

constexpr int64_t kMaxDim = int64_t{1} << 20;

int64_t int_key(const json& obj, const char* key, int64_t fallback, const std::string& label, bool required = false) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    check(!required, ErrorKind::not_found, label + ": missing key 'vision_config." + key + "'");
    return fallback;
  }
  check(it->is_number_integer(), ErrorKind::invalid_input, label + ": key 'vision_config." + key + "' must be an integer");
  const int64_t v = it->get<int64_t>();
  check(v > 0 && v <= kMaxDim, ErrorKind::invalid_input,
        label + ": key 'vision_config." + key + "' = " + std::to_string(v) + " is out of range");
  return v;
}

int32_t token_key(const json& root, const char* key, const char* alias) {
  for (const char* k : {key, alias}) {
    auto it = root.find(k);
    if (it != root.end() && it->is_number_integer() && it->get<int64_t>() >= 0 && it->get<int64_t>() <= INT32_MAX)
      return static_cast<int32_t>(it->get<int64_t>());
  }
  return -1;
}
}  // namespace

int64_t VisionConfig::grid_side() const { return static_cast<int64_t>(std::sqrt(static_cast<double>(num_position_embeddings))); }

VisionConfig parse_vision_config(const json& root, const std::string& label) {
  auto vit = root.find("vision_config");
  check(vit != root.end() && vit->is_object(), ErrorKind::not_found, label + ": missing object 'vision_config'");
  const json& v = *vit;
  VisionConfig c;
  // transformers' attribute_map: depth / num_heads, also spelt num_hidden_layers / num_attention_heads.
  c.depth = int_key(v, "depth", int_key(v, "num_hidden_layers", 0, label), label);
  c.num_heads = int_key(v, "num_heads", int_key(v, "num_attention_heads", 0, label), label);
  check(c.depth > 0 && c.num_heads > 0, ErrorKind::not_found, label + ": vision_config needs 'depth' and 'num_heads'");
  c.hidden_size = int_key(v, "hidden_size", 0, label, true);
  c.intermediate_size = int_key(v, "intermediate_size", 0, label, true);
  c.in_channels = int_key(v, "in_channels", 3, label);
  c.patch_size = int_key(v, "patch_size", 16, label);
  c.temporal_patch_size = int_key(v, "temporal_patch_size", 2, label);
  c.spatial_merge_size = int_key(v, "spatial_merge_size", 2, label);
  c.out_hidden_size = int_key(v, "out_hidden_size", 0, label, true);
  c.num_position_embeddings = int_key(v, "num_position_embeddings", 0, label, true);
  check(c.hidden_size % c.num_heads == 0 && c.head_dim() % 4 == 0, ErrorKind::invalid_input,
        label + ": vision_config hidden_size / num_heads must be a multiple of 4 (2-D rotary halves)");
  check(c.grid_side() * c.grid_side() == c.num_position_embeddings, ErrorKind::invalid_input,
        label + ": vision_config num_position_embeddings must be a square (the learned position grid)");
  if (auto rp = v.find("rope_parameters"); rp != v.end() && rp->is_object()) {
    if (auto t = rp->find("rope_theta"); t != rp->end() && t->is_number()) c.rope_theta = t->get<double>();
  }
  check(std::isfinite(c.rope_theta) && c.rope_theta > 1.0, ErrorKind::invalid_input, label + ": vision_config rope_theta must be above 1");
  if (auto act = v.find("hidden_act"); act != v.end() && act->is_string()) {
    const std::string a = act->get<std::string>();
    if (a == "gelu_pytorch_tanh" || a == "gelu_new" || a == "gelu_fast") c.hidden_act = ops::GeluKind::tanh;
    else if (a == "gelu") c.hidden_act = ops::GeluKind::erf;
    else fail(ErrorKind::unsupported, label + ": vision_config hidden_act '" + a + "' is not supported (gelu, gelu_pytorch_tanh)");
  }
  c.image_token_id = token_key(root, "image_token_id", "image_token_index");
  c.vision_start_token_id = token_key(root, "vision_start_token_id", "vision_start_token_index");
  return c;
}

}  // namespace sanctum

#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>

#include "base/error.h"
#include "base/mapped_file.h"

namespace sanctum {

namespace {

using nlohmann::json;

// Bounds that no real model reaches; they keep hostile configs from allocating without limit.
constexpr int64_t kMaxLayers = 100000;
constexpr int64_t kMaxDim = int64_t{1} << 24;

std::string label_for(const std::string& dir) { return dir == "<memory>" ? "config.json" : dir + "/config.json"; }

const json* find_key(const json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;  // null means "not set" in HF configs
  return &*it;
}

[[noreturn]] void wrong_type(const std::string& label, const std::string& key, const char* expected, const json& v) {
  fail(ErrorKind::invalid_input, label + ": key '" + key + "' must be " + expected + ", got " + v.type_name());
}

std::optional<int64_t> get_int(const json& obj, const std::string& key, const std::string& label) {
  const json* v = find_key(obj, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    check(v->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), ErrorKind::invalid_input,
          label + ": key '" + key + "' is out of range");
    return v->get<int64_t>();
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    // 4096.0 is an integer written by a float-minded tool.
    const double d = v->get<double>();
    check(std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15, ErrorKind::invalid_input,
          label + ": key '" + key + "' must be an integer, got " + v->dump());
    return static_cast<int64_t>(d);
  }
  wrong_type(label, key, "an integer", *v);
}

std::optional<double> get_double(const json& obj, const std::string& key, const std::string& label) {
  const json* v = find_key(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(label, key, "a number", *v);
  return v->get<double>();
}

std::optional<bool> get_bool(const json& obj, const std::string& key, const std::string& label) {
  const json* v = find_key(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(label, key, "a boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> get_string(const json& obj, const std::string& key, const std::string& label) {
  const json* v = find_key(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(label, key, "a string", *v);
  return v->get<std::string>();
}

std::vector<int64_t> get_int_list(const json& obj, const std::string& key, const std::string& label) {
  std::vector<int64_t> out;
  const json* v = find_key(obj, key);
  if (!v) return out;
  if (!v->is_array()) wrong_type(label, key, "a list of integers", *v);
  for (const json& e : *v) {
    if (!e.is_number_integer()) wrong_type(label, key, "a list of integers", *v);
    out.push_back(e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                      ? std::numeric_limits<int64_t>::max()
                      : e.get<int64_t>());
  }
  return out;
}

json parse_object(const std::string& text, const std::string& label) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  check(!j.is_discarded(), ErrorKind::invalid_input, label + ": not valid JSON");
  check(j.is_object(), ErrorKind::invalid_input, label + ": not a JSON object");
  return j;
}

// eos_token_id is an int or a list of ints.
void add_token_ids(const json& obj, const std::string& key, const std::string& label, std::vector<int32_t>* out) {
  const json* v = find_key(obj, key);
  if (!v) return;
  std::vector<int64_t> ids;
  if (v->is_array()) {
    ids = get_int_list(obj, key, label);
  } else {
    if (!v->is_number_integer()) wrong_type(label, key, "an integer or a list of integers", *v);
    ids.push_back(*get_int(obj, key, label));
  }
  for (int64_t id : ids) {
    check(id >= 0 && id <= std::numeric_limits<int32_t>::max(), ErrorKind::invalid_input,
          label + ": key '" + key + "' holds an invalid token id " + std::to_string(id));
    if (std::find(out->begin(), out->end(), static_cast<int32_t>(id)) == out->end()) out->push_back(static_cast<int32_t>(id));
  }
}

bool is_qwen3_5_family(const std::string& t) {
  return t == "qwen3_5" || t == "qwen3_5_text" || t == "qwen3_5_moe" || t == "qwen3_5_moe_text" || t == "qwen3_next";
}

void parse_rope(ModelConfig& c, const std::string& label) {
  const json& raw = c.raw;
  // transformers 5: rope_parameters; older: rope_theta + rope_scaling at the root.
  const json* params = find_key(raw, "rope_parameters");
  std::string where = "rope_parameters";
  if (params && params->is_object() && !params->contains("rope_theta") && !params->contains("rope_type") && !params->contains("type") &&
      params->contains("full_attention")) {
    params = &(*params)["full_attention"];  // per-layer-type form; our attention layers are full attention
    where = "rope_parameters.full_attention";
  }
  if (!params) {
    params = find_key(raw, "rope_scaling");
    where = "rope_scaling";
  }
  static const json empty = json::object();
  if (params && !params->is_object()) wrong_type(label, where, "an object", *params);
  const json& rp = params ? *params : empty;
  const std::string rl = label + ": " + where;  // messages read "config.json: rope_scaling: key 'factor' ..."

  ops::RopeConfig& r = c.rope;
  std::string type = "default";
  if (auto t = get_string(rp, "rope_type", rl)) type = *t;
  else if (auto t2 = get_string(rp, "type", rl)) type = *t2;
  if (type == "default" || type == "mrope") r.type = ops::RopeConfig::Type::standard;
  else if (type == "linear") r.type = ops::RopeConfig::Type::linear;
  else if (type == "yarn") r.type = ops::RopeConfig::Type::yarn;
  else if (type == "llama3") r.type = ops::RopeConfig::Type::llama3;
  else fail(ErrorKind::unsupported, label + ": RoPE type '" + type + "' is not supported (default, linear, yarn, llama3)");

  r.theta = get_double(rp, "rope_theta", rl).value_or(get_double(raw, "rope_theta", label).value_or(10000.0));
  check(std::isfinite(r.theta) && r.theta > 1.0, ErrorKind::invalid_input, label + ": rope_theta must be a number above 1");
  const int64_t orig = get_int(rp, "original_max_position_embeddings", rl).value_or(0);
  r.original_max_position = static_cast<int>(std::clamp<int64_t>(orig > 0 ? orig : c.max_position_embeddings, 0, INT32_MAX));
  if (auto f = get_double(rp, "factor", rl)) {
    r.factor = *f;
  } else if (r.type == ops::RopeConfig::Type::yarn && orig > 0 && c.max_position_embeddings > 0) {
    r.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(orig);  // as transformers derives it
  }
  check(std::isfinite(r.factor) && r.factor > 0, ErrorKind::invalid_input, label + ": RoPE factor must be a positive number");
  r.beta_fast = get_double(rp, "beta_fast", rl).value_or(32.0);
  r.beta_slow = get_double(rp, "beta_slow", rl).value_or(1.0);
  r.mscale = get_double(rp, "mscale", rl).value_or(1.0);
  r.mscale_all_dim = get_double(rp, "mscale_all_dim", rl).value_or(0.0);
  r.attention_factor = get_double(rp, "attention_factor", rl).value_or(0.0);
  r.low_freq_factor = get_double(rp, "low_freq_factor", rl).value_or(1.0);
  r.high_freq_factor = get_double(rp, "high_freq_factor", rl).value_or(4.0);

  const double partial =
      get_double(rp, "partial_rotary_factor", rl)
          .value_or(get_double(raw, "partial_rotary_factor", label).value_or(is_qwen3_5_family(c.model_type) ? 0.25 : 1.0));
  check(std::isfinite(partial) && partial > 0.0 && partial <= 1.0, ErrorKind::invalid_input,
        label + ": partial_rotary_factor must be in (0, 1]");
  r.head_dim = static_cast<int>(c.head_dim);
  r.rotary_dim = static_cast<int>(partial * static_cast<double>(c.head_dim));
  check(r.rotary_dim >= 2 && r.rotary_dim % 2 == 0, ErrorKind::invalid_input,
        label + ": partial_rotary_factor x head_dim = " + std::to_string(r.rotary_dim) + " must be even and at least 2");

  // mrope_section may sit in the RoPE object or, in older qwen2-vl configs, in rope_scaling.
  std::vector<int64_t> mrope = get_int_list(rp, "mrope_section", rl);
  c.mrope_interleaved = get_bool(rp, "mrope_interleaved", rl).value_or(get_bool(raw, "mrope_interleaved", label).value_or(false));
  // Not checked against rotary_dim: mlx-lm writes its default [11, 11, 10] even for tiny heads, and with
  // text-only positions (all sections share one position) the layout does not change the rotation.
  for (int64_t s : mrope) {
    check(s >= 0 && s <= kMaxDim, ErrorKind::invalid_input, label + ": mrope_section entries must be non-negative");
    c.mrope_section.push_back(static_cast<int>(s));
  }
}

void parse_layers(ModelConfig& c, const std::string& label) {
  const json& raw = c.raw;
  c.layers.assign(static_cast<size_t>(c.num_hidden_layers), LayerConfig{});
  if (const json* types = find_key(raw, "layer_types")) {
    if (!types->is_array()) wrong_type(label, "layer_types", "a list of strings", *types);
    check(types->size() == c.layers.size(), ErrorKind::invalid_input,
          label + ": layer_types has " + std::to_string(types->size()) +
              " entries for num_hidden_layers = " + std::to_string(c.num_hidden_layers));
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      if (!t.is_string()) wrong_type(label, "layer_types", "a list of strings", *types);
      const std::string& s = t.get_ref<const std::string&>();
      if (s == "full_attention" || s == "sliding_attention") c.layers[i].mixer = MixerKind::attention;
      else if (s == "linear_attention") c.layers[i].mixer = MixerKind::gated_delta_net;
      else
        fail(ErrorKind::unsupported,
             label + ": layer_types[" + std::to_string(i) + "] = '" + s + "' is not supported (full_attention, linear_attention)");
    }
  } else if (is_qwen3_5_family(c.model_type)) {
    const int64_t interval = get_int(raw, "full_attention_interval", label).value_or(4);
    check(interval > 0, ErrorKind::invalid_input, label + ": full_attention_interval must be positive");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      c.layers[static_cast<size_t>(i)].mixer = (i + 1) % interval == 0 ? MixerKind::attention : MixerKind::gated_delta_net;
    }
  }

  if (c.num_experts > 0) {
    const int64_t step = get_int(raw, "decoder_sparse_step", label).value_or(1);
    check(step > 0, ErrorKind::invalid_input, label + ": decoder_sparse_step must be positive");
    const std::vector<int64_t> dense_list = get_int_list(raw, "mlp_only_layers", label);
    const std::set<int64_t> dense(dense_list.begin(), dense_list.end());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (!dense.count(i) && (i + 1) % step == 0) c.layers[static_cast<size_t>(i)].ffn = FfnKind::moe;
    }
  }
}

// Which layers slide, as transformers decides it: "sliding_attention" in layer_types; qwen2's
// use_sliding_window from layer max_window_layers on; mistral and mixtral everywhere once
// sliding_window is set.
void parse_attention_window(ModelConfig& c, const std::string& label) {
  const json& raw = c.raw;
  const json* w = find_key(raw, "sliding_window");
  if (!w || w->is_null()) return;
  if (!w->is_number_integer() || w->get<int64_t>() <= 0) wrong_type(label, "sliding_window", "a positive integer or null", *w);
  bool slides = false;
  if (const json* types = find_key(raw, "layer_types")) {
    for (const json& t : *types) slides = slides || t == "sliding_attention";
  } else if (c.model_type == "qwen2" || c.model_type == "qwen2_moe") {
    slides = get_bool(raw, "use_sliding_window", label).value_or(false) &&
             get_int(raw, "max_window_layers", label).value_or(c.num_hidden_layers) < c.num_hidden_layers;
  } else {
    slides = c.model_type == "mistral" || c.model_type == "mixtral";
  }
  if (slides) c.attention_window = w->get<int64_t>();
}

int64_t checked_dim(const ModelConfig& c, const std::string& label, const std::string& key, int64_t v, bool allow_zero) {
  check(v >= (allow_zero ? 0 : 1) && v <= (key == "vocab_size" || key == "max_position_embeddings" ? (int64_t{1} << 40) : kMaxDim),
        ErrorKind::invalid_input, label + ": key '" + key + "' = " + std::to_string(v) + " is out of range");
  return v;
}

}  // namespace

int64_t ModelConfig::context_limit() const {
  if (attention_window <= 0) return max_position_embeddings;
  return max_position_embeddings > 0 ? std::min(max_position_embeddings, attention_window) : attention_window;
}

int64_t ModelConfig::require_int(const std::string& key) const {
  const std::string label = label_for(dir);
  auto v = get_int(raw, key, label);
  check(v.has_value(), ErrorKind::not_found, label + ": missing key '" + key + "'");
  return *v;
}

int64_t ModelConfig::int_or(const std::string& key, int64_t fallback) const { return get_int(raw, key, label_for(dir)).value_or(fallback); }

double ModelConfig::double_or(const std::string& key, double fallback) const {
  return get_double(raw, key, label_for(dir)).value_or(fallback);
}

bool ModelConfig::bool_or(const std::string& key, bool fallback) const { return get_bool(raw, key, label_for(dir)).value_or(fallback); }

ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_config_json, const std::string& dir) {
  const std::string label = label_for(dir);
  ModelConfig c;
  c.dir = dir;
  json root = parse_object(config_json, label);

  // VL checkpoints nest the language model's fields; the root's value wins where both exist.
  c.raw = root;
  if (const json* text = find_key(root, "text_config")) {
    if (!text->is_object()) wrong_type(label, "text_config", "an object", *text);
    for (auto it = text->begin(); it != text->end(); ++it) {
      if (!find_key(root, it.key())) c.raw[it.key()] = *it;
    }
  }
  const json& raw = c.raw;

  auto model_type = get_string(raw, "model_type", label);
  check(model_type.has_value(), ErrorKind::not_found, label + ": missing key 'model_type'");
  c.model_type = *model_type;

  c.hidden_size = checked_dim(c, label, "hidden_size", c.require_int("hidden_size"), false);
  c.num_hidden_layers = c.require_int("num_hidden_layers");
  check(c.num_hidden_layers > 0 && c.num_hidden_layers <= kMaxLayers, ErrorKind::invalid_input,
        label + ": key 'num_hidden_layers' = " + std::to_string(c.num_hidden_layers) + " is out of range");
  c.num_attention_heads = checked_dim(c, label, "num_attention_heads", c.require_int("num_attention_heads"), false);
  c.vocab_size = checked_dim(c, label, "vocab_size", c.require_int("vocab_size"), false);
  c.intermediate_size = checked_dim(c, label, "intermediate_size", c.int_or("intermediate_size", 0), true);
  c.num_key_value_heads = checked_dim(c, label, "num_key_value_heads", c.int_or("num_key_value_heads", c.num_attention_heads), false);
  check(c.num_attention_heads % c.num_key_value_heads == 0, ErrorKind::invalid_input,
        label + ": num_attention_heads (" + std::to_string(c.num_attention_heads) + ") is not a multiple of num_key_value_heads (" +
            std::to_string(c.num_key_value_heads) + ")");
  if (auto hd = get_int(raw, "head_dim", label)) {
    c.head_dim = checked_dim(c, label, "head_dim", *hd, false);
  } else {
    check(c.hidden_size % c.num_attention_heads == 0, ErrorKind::invalid_input,
          label + ": no head_dim and hidden_size is not a multiple of num_attention_heads");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  c.rms_norm_eps = c.double_or("rms_norm_eps", 1e-6);
  check(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps >= 0, ErrorKind::invalid_input,
        label + ": rms_norm_eps must be a non-negative number");
  c.tie_word_embeddings = c.bool_or("tie_word_embeddings", false);
  c.max_position_embeddings = checked_dim(c, label, "max_position_embeddings", c.int_or("max_position_embeddings", 0), true);

  c.linear_num_key_heads = checked_dim(c, label, "linear_num_key_heads", c.int_or("linear_num_key_heads", 0), true);
  c.linear_num_value_heads = checked_dim(c, label, "linear_num_value_heads", c.int_or("linear_num_value_heads", 0), true);
  c.linear_key_head_dim = checked_dim(c, label, "linear_key_head_dim", c.int_or("linear_key_head_dim", 0), true);
  c.linear_value_head_dim = checked_dim(c, label, "linear_value_head_dim", c.int_or("linear_value_head_dim", 0), true);
  c.linear_conv_kernel_dim = checked_dim(c, label, "linear_conv_kernel_dim", c.int_or("linear_conv_kernel_dim", 0), true);
  // Mixtral calls it num_local_experts.
  c.num_experts = checked_dim(c, label, "num_experts", c.int_or("num_experts", c.int_or("num_local_experts", 0)), true);
  c.num_experts_per_tok = checked_dim(c, label, "num_experts_per_tok", c.int_or("num_experts_per_tok", 0), true);
  check(c.num_experts_per_tok <= c.num_experts || c.num_experts == 0, ErrorKind::invalid_input,
        label + ": num_experts_per_tok exceeds num_experts");
  c.moe_intermediate_size = checked_dim(c, label, "moe_intermediate_size", c.int_or("moe_intermediate_size", 0), true);
  c.shared_expert_intermediate_size =
      checked_dim(c, label, "shared_expert_intermediate_size", c.int_or("shared_expert_intermediate_size", 0), true);
  c.norm_topk_prob = c.bool_or("norm_topk_prob", true);

  parse_rope(c, label);
  parse_layers(c, label);
  parse_attention_window(c, label);

  add_token_ids(raw, "eos_token_id", label, &c.eos_token_ids);
  if (auto bos = get_int(raw, "bos_token_id", label)) c.bos_token_id = static_cast<int32_t>(std::clamp<int64_t>(*bos, -1, INT32_MAX));
  if (!generation_config_json.empty()) {
    const std::string glabel = dir == "<memory>" ? "generation_config.json" : dir + "/generation_config.json";
    json gen = parse_object(generation_config_json, glabel);
    add_token_ids(gen, "eos_token_id", glabel, &c.eos_token_ids);
    if (c.bos_token_id < 0) {
      if (auto bos = get_int(gen, "bos_token_id", glabel)) c.bos_token_id = static_cast<int32_t>(std::clamp<int64_t>(*bos, -1, INT32_MAX));
    }
  }

  c.quant = QuantConfig::from_json(raw);
  return c;
}

ModelConfig load_model_config(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path config = fs::path(dir) / "config.json";
  std::error_code ec;
  check(fs::exists(config, ec), ErrorKind::not_found, config.string() + ": not found (is '" + dir + "' a model directory?)");
  const fs::path gen = fs::path(dir) / "generation_config.json";
  return parse_model_config(read_file(config.string()), fs::exists(gen, ec) ? read_file(gen.string()) : std::string(), dir);
}

}  // namespace sanctum

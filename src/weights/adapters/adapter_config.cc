#include "weights/adapters/adapter_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace sanctum {

namespace {

using nlohmann::json;

std::string field(const std::string& path, const std::string& name) { return path + ": '" + name + "'"; }

int positive_int(const json& j, const std::string& path, const std::string& name) {
  check(j.is_number_integer() && j.get<int64_t>() > 0 && j.get<int64_t>() <= (1 << 20), ErrorKind::invalid_input,
        field(path, name) + " must be a positive integer (the LoRA rank), got " + j.dump());
  return j.get<int>();
}

float finite_float(const json& j, const std::string& path, const std::string& name) {
  check(j.is_number(), ErrorKind::invalid_input, field(path, name) + " must be a number, got " + j.dump());
  const double v = j.get<double>();
  check(std::isfinite(v) && std::abs(v) < 1e30, ErrorKind::invalid_input,
        field(path, name) + " must be finite (and below 1e30), got " + j.dump());
  return static_cast<float>(v);
}

bool boolean(const json& config, const std::string& path, const std::string& name) {
  auto it = config.find(name);
  if (it == config.end() || it->is_null()) return false;
  check(it->is_boolean(), ErrorKind::invalid_input, field(path, name) + " must be true or false, got " + it->dump());
  return it->get<bool>();
}

std::vector<std::string> strings(const json& j, const std::string& path, const std::string& name) {
  check(j.is_array(), ErrorKind::invalid_input, field(path, name) + " must be a list of strings");
  std::vector<std::string> out;
  for (const auto& s : j) {
    check(s.is_string() && !s.get_ref<const std::string&>().empty(), ErrorKind::invalid_input,
          field(path, name) + " must be a list of non-empty strings, got " + s.dump());
    out.push_back(s.get<std::string>());
  }
  return out;
}

// Patterns come from a file: bounded, so matching them against module paths stays cheap.
constexpr size_t kMaxPattern = 256;

// Why a pattern could make std::regex's backtracking matcher run for ever (empty when it cannot): a
// quantifier on a quantifier (`.++`), or a repeat (`*`, `+`, `{}`) of a group that holds a quantifier
// or an alternation (`(a+)+`, `(a|a)*`). Module-name patterns never need either; an optional group
// (`(.*\.)?`, PEFT's own wrapper) is fine.
std::string backtracking_risk(const std::string& p) {
  auto quantifier = [](char c) { return c == '*' || c == '+' || c == '?' || c == '{'; };
  std::vector<bool> group_risky;  // per open group: holds a quantifier or an alternation
  bool last_quantified = false, last_risky_group = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {  // an escaped character is a literal atom
      ++i;
      last_quantified = last_risky_group = false;
      continue;
    }
    if (c == '[') {  // a class is one atom; skip to its end
      for (++i; i < p.size() && p[i] != ']'; ++i)
        if (p[i] == '\\') ++i;
      last_quantified = last_risky_group = false;
      continue;
    }
    if (quantifier(c)) {
      const bool lazy = c == '?' && last_quantified && i > 0 && p[i - 1] != '?';
      if (last_quantified && !lazy) return "a quantifier on a quantifier";
      if (last_risky_group && c != '?') return "a repeat of a group that holds a quantifier or '|'";
      if (!lazy && !group_risky.empty()) group_risky.back() = true;
      if (c == '{')
        while (i < p.size() && p[i] != '}') ++i;
      last_quantified = !lazy;
      last_risky_group = false;
      continue;
    }
    last_quantified = false;
    last_risky_group = false;
    if (c == '(') group_risky.push_back(false);
    else if (c == '|' && !group_risky.empty()) group_risky.back() = true;
    else if (c == ')' && !group_risky.empty()) {
      last_risky_group = group_risky.back();
      group_risky.pop_back();
      if (last_risky_group && !group_risky.empty()) group_risky.back() = true;
    }
  }
  return "";
}

// A Python regular expression as std::regex (ECMAScript) reads it; refused by name when it does not parse.
std::regex compile(const std::string& pattern, const std::string& path, const std::string& name) {
  check(pattern.size() <= kMaxPattern, ErrorKind::invalid_input,
        field(path, name) + ": a pattern of " + std::to_string(pattern.size()) + " characters; at most " + std::to_string(kMaxPattern));
  if (const std::string risk = backtracking_risk(pattern); !risk.empty())
    fail(ErrorKind::invalid_input, field(path, name) + ": '" + pattern + "' has " + risk +
                                       ", which can take a regex matcher exponential time; list the module names, or simplify the pattern");
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    fail(ErrorKind::invalid_input,
         field(path, name) + ": '" + pattern + "' is not a regular expression sanctum can read (" + e.what() + ")");
  }
}

// Whole-string match; a pattern too costly to run is an error naming it, not a foreign exception.
bool full_match(const std::string& text, const std::string& pattern, const std::string& path, const std::string& name) {
  const std::regex re = compile(pattern, path, name);
  try {
    return std::regex_match(text, re);
  } catch (const std::regex_error& e) {
    fail(ErrorKind::invalid_input, field(path, name) + ": matching '" + pattern + "' failed (" + e.what() + "); simplify the pattern");
  }
}

// PEFT's rank_pattern / alpha_pattern lookup: the first key K with `(.*\.)?(K)$` matching the module.
template <class T>
const T* pattern_value(const std::map<std::string, T>& patterns, const std::string& module, const std::string& path,
                       const std::string& name) {
  for (const auto& [key, value] : patterns) {
    if (full_match(module, "(.*\\.)?(" + key + ")", path, name + "." + key)) return &value;
  }
  return nullptr;
}

void parse_mlx_lm(const json& config, const std::string& path, AdapterConfig& c) {
  const std::string type = config.value("fine_tune_type", std::string("lora"));
  check(type != "full", ErrorKind::unsupported,
        field(path, "fine_tune_type") + " is 'full': a full fine-tune is a whole checkpoint, not an adapter; load it with --model");
  check(type == "lora" || type == "dora", ErrorKind::unsupported,
        field(path, "fine_tune_type") + " is '" + type + "'; sanctum reads 'lora' and 'dora' adapters");
  c.dora = type == "dora";
  auto nl = config.find("num_layers");
  check(nl != config.end() && nl->is_number_integer(), ErrorKind::invalid_input,
        field(path, "num_layers") + " is missing or not an integer (mlx-lm writes the number of adapted last layers)");
  c.num_layers = nl->get<int64_t>() < 0 ? -1 : static_cast<int>(std::min<int64_t>(nl->get<int64_t>(), 1 << 20));
  auto lp = config.find("lora_parameters");
  check(lp != config.end() && lp->is_object(), ErrorKind::invalid_input,
        field(path, "lora_parameters") + " is missing or not an object (expected {\"rank\", \"scale\", \"dropout\", \"keys\"})");
  check(lp->contains("rank"), ErrorKind::invalid_input, field(path, "lora_parameters.rank") + " is missing");
  c.rank = positive_int((*lp)["rank"], path, "lora_parameters.rank");
  check(lp->contains("scale"), ErrorKind::invalid_input,
        field(path, "lora_parameters.scale") + " is missing (mlx-lm's LoRA scale; PEFT's lora_alpha belongs in a PEFT config)");
  c.scale = finite_float((*lp)["scale"], path, "lora_parameters.scale");
  auto keys = lp->find("keys");
  if (keys != lp->end() && !keys->is_null()) c.keys = strings(*keys, path, "lora_parameters.keys");
}

void parse_peft(const json& config, const std::string& path, AdapterConfig& c) {
  const std::string type = config.value("peft_type", std::string("LORA"));
  check(type == "LORA", ErrorKind::unsupported, field(path, "peft_type") + " is '" + type + "'; sanctum reads LORA adapters");
  check(config.contains("r"), ErrorKind::invalid_input, field(path, "r") + " is missing");
  c.rank = positive_int(config["r"], path, "r");
  c.alpha = config.contains("lora_alpha") ? finite_float(config["lora_alpha"], path, "lora_alpha") : 8.0f;
  c.rslora = boolean(config, path, "use_rslora");
  c.dora = boolean(config, path, "use_dora");
  check(!boolean(config, path, "fan_in_fan_out"), ErrorKind::unsupported,
        field(path, "fan_in_fan_out") + " is true: that is for GPT-2 style Conv1D weights, which no architecture sanctum runs has");
  const std::string bias = config.value("bias", std::string("none"));
  check(bias == "none", ErrorKind::unsupported,
        field(path, "bias") + " is '" + bias + "': adapters that train biases are not supported (retrain with bias='none')");
  for (const char* name : {"modules_to_save", "trainable_token_indices", "target_parameters"}) {
    auto it = config.find(name);
    const bool empty = it == config.end() || it->is_null() || (it->is_array() && it->empty()) || (it->is_object() && it->empty());
    check(empty, ErrorKind::unsupported,
          field(path, name) + " is not empty: that adapter replaces whole modules, which a LoRA merge cannot express");
  }
  // Variants whose forward is not W + scale * B A.
  check(!boolean(config, path, "lora_bias"), ErrorKind::unsupported,
        field(path, "lora_bias") + " is true: LoRA-B biases are not supported");
  check(!boolean(config, path, "use_qalora"), ErrorKind::unsupported,
        field(path, "use_qalora") + " is true: QA-LoRA pools its inputs, which a merge into the weight cannot express");
  for (const char* name : {"layer_replication", "alora_invocation_tokens"}) {
    auto it = config.find(name);
    check(it == config.end() || it->is_null(), ErrorKind::unsupported,
          field(path, name) + " is set: that adapter changes the model's structure or activation, not only its weights");
  }
  auto ex = config.find("exclude_modules");
  check(ex == config.end() || ex->is_null() || (ex->is_array() && ex->empty()), ErrorKind::unsupported,
        field(path, "exclude_modules") + " is not supported; list the wanted modules in target_modules instead");
  auto tm = config.find("target_modules");
  check(tm != config.end() && !tm->is_null(), ErrorKind::invalid_input, field(path, "target_modules") + " is missing");
  if (tm->is_string() && tm->get<std::string>() == "all-linear") {
    c.all_linear = true;
  } else if (tm->is_string()) {
    c.target_regex = tm->get<std::string>();
    compile(*c.target_regex, path, "target_modules");
  } else {
    c.target_modules = strings(*tm, path, "target_modules");
  }
  for (const char* name : {"rank_pattern", "alpha_pattern"}) {
    auto it = config.find(name);
    if (it == config.end() || it->is_null()) continue;
    check(it->is_object(), ErrorKind::invalid_input, field(path, name) + " must be an object of pattern -> value");
    for (auto p = it->begin(); p != it->end(); ++p) {
      compile("(.*\\.)?(" + p.key() + ")", path, std::string(name) + "." + p.key());
      if (std::string(name) == "rank_pattern") c.rank_pattern[p.key()] = positive_int(p.value(), path, "rank_pattern." + p.key());
      else c.alpha_pattern[p.key()] = finite_float(p.value(), path, "alpha_pattern." + p.key());
    }
  }
  auto lt = config.find("layers_to_transform");
  if (lt != config.end() && !lt->is_null()) {
    const json list = lt->is_array() ? *lt : json::array({*lt});
    for (const auto& i : list) {
      check(i.is_number_integer() && i.get<int64_t>() >= 0 && i.get<int64_t>() < (1 << 20), ErrorKind::invalid_input,
            field(path, "layers_to_transform") + " must be a layer index or a list of them, got " + lt->dump());
      c.layers_to_transform.push_back(i.get<int>());
    }
  }
  auto lpat = config.find("layers_pattern");
  if (lpat != config.end() && !lpat->is_null())
    c.layers_pattern = lpat->is_string() ? std::vector<std::string>{lpat->get<std::string>()} : strings(*lpat, path, "layers_pattern");
}

}  // namespace

int layer_index_of(const std::string& module) {
  for (size_t at = module.find("layers."); at != std::string::npos; at = module.find("layers.", at + 1)) {
    if (at > 0 && module[at - 1] != '.') continue;
    size_t i = at + 7, end = i;
    while (end < module.size() && end - i < 7 && std::isdigit(static_cast<unsigned char>(module[end]))) ++end;
    if (end > i && (end == module.size() || module[end] == '.')) return std::stoi(module.substr(i, end - i));
  }
  return -1;
}

int AdapterConfig::rank_for(const std::string& module) const {
  if (format == AdapterFormat::peft)
    if (const int* r = pattern_value(rank_pattern, module, path, "rank_pattern")) return *r;
  return rank;
}

float AdapterConfig::scale_for(const std::string& module) const {
  if (format == AdapterFormat::mlx_lm) return scale;
  const float* a = pattern_value(alpha_pattern, module, path, "alpha_pattern");
  const float r = static_cast<float>(rank_for(module));
  return (a ? *a : alpha) / (rslora ? std::sqrt(r) : r);
}

bool AdapterConfig::targets(const std::string& module, int n_layers, std::string* why) const {
  const int layer = layer_index_of(module);
  const std::string in_layer = layer < 0 ? module : module.substr(module.find('.', module.find("layers.") + 7) + 1);
  if (format == AdapterFormat::mlx_lm) {
    if (keys && std::find(keys->begin(), keys->end(), in_layer) == keys->end() &&
        std::find(keys->begin(), keys->end(), module) == keys->end()) {
      *why = "lora_parameters.keys does not list '" + in_layer + "'";
      return false;
    }
    if (layer >= 0 && num_layers >= 0 && layer < n_layers - num_layers) {
      *why = "num_layers is " + std::to_string(num_layers) + ", so only layers " + std::to_string(std::max(0, n_layers - num_layers)) +
             ".." + std::to_string(n_layers - 1) + " of " + std::to_string(n_layers) + " carry the adapter";
      return false;
    }
    return true;
  }
  bool found = false;
  if (all_linear) {
    found = !module.ends_with("lm_head");
  } else if (target_regex) {
    found = full_match(module, *target_regex, path, "target_modules");
  } else {
    for (const std::string& t : target_modules) found = found || module == t || (module.size() > t.size() && module.ends_with("." + t));
  }
  if (!found) {
    *why = "target_modules does not match '" + module + "'";
    return false;
  }
  if (!layers_to_transform.empty() && !target_regex) {
    if (std::find(layers_to_transform.begin(), layers_to_transform.end(), layer) == layers_to_transform.end()) {
      *why = "layers_to_transform does not list layer " + std::to_string(layer);
      return false;
    }
    if (!layers_pattern.empty()) {
      bool named = false;
      for (const std::string& p : layers_pattern) named = named || full_match(module, ".*\\." + p + "\\.\\d+\\..*", path, "layers_pattern");
      if (!named) {
        *why = "layers_pattern does not match '" + module + "'";
        return false;
      }
    }
  }
  return true;
}

AdapterConfig parse_adapter_config(const std::string& text, const std::string& path, AdapterFormat format) {
  json config;
  try {
    config = json::parse(text);
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_input, path + ": not valid JSON (" + e.what() + ")");
  }
  check(config.is_object(), ErrorKind::invalid_input, path + ": not a JSON object");
  AdapterConfig c;
  c.format = format;
  c.path = path;
  try {
    if (format == AdapterFormat::mlx_lm) parse_mlx_lm(config, path, c);
    else parse_peft(config, path, c);
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_input, path + ": a field has the wrong type (" + e.what() + ")");
  }
  return c;
}

}  // namespace sanctum

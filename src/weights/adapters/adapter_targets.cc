#include "weights/adapters/adapter_targets.h"

#include <algorithm>
#include <set>

#include "base/error.h"

namespace sanctum {

namespace {

// Towers and heads beside the language model that an adapter for it never targets.
bool beside_language_model(const std::string& name) {
  return name.starts_with("mtp.") || name.find("visual.") != std::string::npos || name.find("vision_tower.") != std::string::npos ||
         name.find("vision_model.") != std::string::npos || name.find("multi_modal_projector.") != std::string::npos;
}

// The flavour-independent part of a module path: from "layers.N." on, else its last component.
std::string canonical(const std::string& module) {
  for (size_t at = module.find("layers."); at != std::string::npos; at = module.find("layers.", at + 1)) {
    if (at == 0 || module[at - 1] == '.') return module.substr(at);
  }
  const size_t dot = module.find_last_of('.');
  return dot == std::string::npos ? module : module.substr(dot + 1);
}

}  // namespace

AdapterPlacement place_adapter(const LoraAdapter& adapter, const std::vector<std::string>& checkpoint_names,
                               const std::string& checkpoint_dir) {
  // Linear modules of the checkpoint (dense `X.weight`, quantized `X.weight` + `X.scales`), by canonical path.
  std::map<std::string, std::vector<std::string>> modules;
  int n_layers = 0;
  for (const std::string& name : checkpoint_names) {
    if (!name.ends_with(".weight") || beside_language_model(name)) continue;
    const std::string prefix = name.substr(0, name.size() - 7);
    modules[canonical(prefix)].push_back(prefix);
    n_layers = std::max(n_layers, layer_index_of(prefix) + 1);
  }
  const std::string& file = adapter.weights_path();
  AdapterPlacement placement;
  for (const auto& [module, target] : adapter.targets()) {
    std::string why;
    if (!adapter.config().targets(module, n_layers, &why))
      fail(ErrorKind::invalid_input,
           file + ": tensor '" + target.a_name + "' adapts '" + module + "', which adapter_config.json excludes: " + why);
    check(canonical(module) != "embed_tokens", ErrorKind::unsupported,
          file + ": tensor '" + target.a_name + "' adapts the token embedding '" + module +
              "': LoRA on embeddings is not supported; retrain without embed_tokens in the adapted keys");
    const int layer = layer_index_of(module);
    check(layer < n_layers, ErrorKind::invalid_input,
          file + ": tensor '" + target.a_name + "' is for layer " + std::to_string(layer) + ", beyond the model's " +
              std::to_string(n_layers) + " layers (" + checkpoint_dir + "): the adapter was trained on a deeper model");
    auto it = modules.find(canonical(module));
    check(it != modules.end(), ErrorKind::invalid_input,
          file + ": tensor '" + target.a_name + "' targets module '" + module + "', which " + checkpoint_dir +
              " does not have (no linear '..." + canonical(module) +
              ".weight'): an adapter for another architecture, or for the other checkpoint flavour's expert layout?");
    std::vector<std::string> found = it->second;
    if (found.size() > 1) {
      auto exact = std::find(found.begin(), found.end(), module);
      check(exact != found.end(), ErrorKind::invalid_input,
            file + ": tensor '" + target.a_name + "' targets '" + module + "', which matches " + std::to_string(found.size()) +
                " modules of " + checkpoint_dir + " ('" + found[0] + "', '" + found[1] + "'); name it in full");
      found = {*exact};
    }
    auto [at, fresh] = placement.emplace(found[0], &target);
    check(fresh, ErrorKind::invalid_input,
          file + ": tensors '" + at->second->a_name + "' and '" + target.a_name + "' both adapt '" + found[0] + "' of " + checkpoint_dir);
  }
  return placement;
}

}  // namespace sanctum

#include "server/lora_specs.h"

#include <algorithm>
#include <fstream>

#include "base/error.h"

namespace sanctum::server {

void add_lora_spec(const std::string& spec, const std::string& where, const std::vector<std::string>& models, LoraLists& into) {
  const size_t eq = spec.find('=');
  check(eq != std::string::npos && eq > 0 && eq + 1 < spec.size(), ErrorKind::invalid_argument,
        where + ": '" + spec + "': expected [MODEL:]NAME=ADAPTER_DIR");
  const std::string key = spec.substr(0, eq), dir = spec.substr(eq + 1);
  const size_t colon = key.rfind(':');
  std::string model, name = key;
  if (colon != std::string::npos) {
    model = key.substr(0, colon);
    name = key.substr(colon + 1);
    check(std::find(models.begin(), models.end(), model) != models.end(), ErrorKind::invalid_argument,
          where + ": '" + spec + "': no --model is named '" + model + "'");
  } else {
    check(models.size() == 1, ErrorKind::invalid_argument,
          where + ": '" + spec + "': with several --model, name the one it applies to: MODEL:NAME=ADAPTER_DIR");
    model = models[0];
  }
  check(!name.empty() && name.find_first_of("/ \t") == std::string::npos, ErrorKind::invalid_argument,
        where + ": '" + spec + "': the adapter name must be non-empty, without '/' or spaces");
  auto [at, fresh] = into[model].emplace(name, dir);
  check(fresh, ErrorKind::invalid_argument, where + ": '" + spec + "': model '" + model + "' already has an adapter named '" + name + "'");
}

LoraLists read_lora_lists(const std::vector<std::string>& flags, const std::string& file, const std::vector<std::string>& models) {
  LoraLists lists;
  for (const std::string& spec : flags) add_lora_spec(spec, "--lora", models, lists);
  if (file.empty()) return lists;
  std::ifstream in(file);
  check(in.good(), ErrorKind::not_found, "--lora-list " + file + ": cannot open it");
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const size_t begin = line.find_first_not_of(" \t\r"), end = line.find_last_not_of(" \t\r");
    if (begin == std::string::npos || line[begin] == '#') continue;
    add_lora_spec(line.substr(begin, end - begin + 1), file + ":" + std::to_string(n), models, lists);
  }
  return lists;
}

}  // namespace sanctum::server

#pragma once
// The per-request adapter list: `--lora [MODEL:]NAME=DIR` flags and the lines of `--lora-list FILE`
// (the same form, one a line, '#' comments), which SIGHUP re-reads.
#include <map>
#include <string>
#include <vector>

namespace sanctum::server {

// model id -> (adapter name -> directory). A spec without MODEL applies to `models[0]` and needs a
// single model. Throws sanctum::Error naming the spec (and `where`, the flag or file:line) for a
// malformed one, an unknown model, or one name given twice for a model.
using LoraLists = std::map<std::string, std::map<std::string, std::string>>;
void add_lora_spec(const std::string& spec, const std::string& where, const std::vector<std::string>& models, LoraLists& into);

// The flags' specs, then the file's lines (when `file` is not empty).
LoraLists read_lora_lists(const std::vector<std::string>& flags, const std::string& file, const std::vector<std::string>& models);

}  // namespace sanctum::server

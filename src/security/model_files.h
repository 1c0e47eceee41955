#pragma once
// Which files in a model directory a load reads, and where a listed path really leads.
#include <string>
#include <vector>

namespace sanctum::security {

// Relative paths (sorted bytewise) of every file in `model_dir` that loading the model would read:
// configs (config.json, generation_config.json), tokenizer files (tokenizer.json, tokenizer_config.json,
// tokenizer.model, tekken.json, special_tokens_map.json, added_tokens.json, vocab.json, vocab.txt,
// merges.txt), chat templates (chat_template.jinja, chat_template.json), every *.safetensors and
// *.safetensors.index.json, adapter_config.json, and every shard a safetensors index names (even one
// that does not exist, so a gate reports it missing). Symlinks count as the file they name.
// Throws Error when the directory cannot be read or an index is malformed or names a path outside.
std::vector<std::string> files_a_load_reads(const std::string& model_dir);

// True for a file name (no directory) that the loader reads from the model directory's top level.
bool is_file_a_load_reads(const std::string& name);

// Canonical (symlink-free, absolute) path of a directory. Throws Error naming it.
std::string canonical_dir(const std::string& dir);

enum class Resolve { ok, missing, escapes, not_regular };

struct Resolved {
  Resolve status = Resolve::missing;
  std::string real_path;  // canonical target when ok (or escapes)
  std::string detail;     // human-readable reason when not ok
};

// Resolves `rel` (already normalized, relative) under `real_dir` (canonical) following symlinks and
// reports whether the final target is a regular file inside real_dir.
Resolved resolve_inside(const std::string& real_dir, const std::string& rel);

}  // namespace sanctum::security

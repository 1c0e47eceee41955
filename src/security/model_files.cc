#include "security/model_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "security/manifest.h"
#include "security/secure_io.h"

namespace sanctum::security {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Shards named by an index's weight_map, normalized and checked to stay inside the directory.
void add_index_shards(const std::string& model_dir, const std::string& index_name, std::set<std::string>& out) {
  const std::string path = model_dir + "/" + index_name;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_all(path));
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::invalid_input, path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map")) return;
  const auto& map = j["weight_map"];
  check(map.is_object(), ErrorKind::invalid_input, path + ": weight_map is not an object");
  for (const auto& [tensor, file] : map.items()) {
    check(file.is_string(), ErrorKind::invalid_input, path + ": weight_map entry for '" + tensor + "' is not a string");
    std::string why;
    std::string rel = normalize_relative_path(file.get<std::string>(), &why);
    check(!rel.empty(), ErrorKind::invalid_input, path + ": weight_map entry for '" + tensor + "': " + why);
    out.insert(rel);
  }
}

}  // namespace

bool is_file_a_load_reads(const std::string& name) {
  static const std::array<std::string_view, 14> exact = {"config.json",
                                                         "generation_config.json",
                                                         "tokenizer.json",
                                                         "tokenizer_config.json",
                                                         "tokenizer.model",
                                                         "tekken.json",
                                                         "special_tokens_map.json",
                                                         "added_tokens.json",
                                                         "vocab.json",
                                                         "vocab.txt",
                                                         "merges.txt",
                                                         "chat_template.jinja",
                                                         "chat_template.json",
                                                         "adapter_config.json"};
  if (std::find(exact.begin(), exact.end(), name) != exact.end()) return true;
  return ends_with(name, ".safetensors") || ends_with(name, ".safetensors.index.json");
}

std::vector<std::string> files_a_load_reads(const std::string& model_dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(model_dir.c_str()), ::closedir);
  if (!dir) {
    int e = errno;
    fail(e == ENOENT ? ErrorKind::not_found : ErrorKind::io, model_dir + ": cannot read model directory: " + std::strerror(e));
  }
  std::set<std::string> found;
  std::vector<std::string> indexes;
  while (dirent* d = ::readdir(dir.get())) {
    std::string name = d->d_name;
    if (name == "." || name == ".." || !is_file_a_load_reads(name)) continue;
    struct stat st {};
    // stat follows symlinks: a directory named x.safetensors is not read; a symlink to a file is.
    // A dangling symlink still counts, so the gate reports it instead of silently skipping it.
    std::string full = model_dir + "/" + name;
    if (::stat(full.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    found.insert(name);
    if (ends_with(name, ".safetensors.index.json") && ::stat(full.c_str(), &st) == 0) indexes.push_back(name);
  }
  for (const auto& index : indexes) add_index_shards(model_dir, index, found);
  return {found.begin(), found.end()};  // std::set orders bytewise
}

std::string canonical_dir(const std::string& dir) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(dir.c_str(), nullptr), &std::free);
  if (!real) {
    int e = errno;
    fail(e == ENOENT ? ErrorKind::not_found : ErrorKind::io, dir + ": cannot resolve model directory: " + std::strerror(e));
  }
  struct stat st {};
  check(::stat(real.get(), &st) == 0 && S_ISDIR(st.st_mode), ErrorKind::invalid_argument, dir + ": not a directory");
  return real.get();
}

Resolved resolve_inside(const std::string& real_dir, const std::string& rel) {
  Resolved r;
  const std::string joined = real_dir + "/" + rel;
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(joined.c_str(), nullptr), &std::free);
  if (!real) {
    int e = errno;
    struct stat lst {};
    r.status = Resolve::missing;
    if (e == ENOENT && ::lstat(joined.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) r.detail = "is a symlink to a file that does not exist";
    else r.detail = std::string("cannot be opened: ") + std::strerror(e);
    return r;
  }
  r.real_path = real.get();
  const std::string prefix = real_dir == "/" ? "/" : real_dir + "/";
  if (r.real_path.compare(0, prefix.size(), prefix) != 0) {
    r.status = Resolve::escapes;
    r.detail = "resolves to " + r.real_path + ", outside the model directory " + real_dir;
    return r;
  }
  struct stat st {};
  if (::stat(r.real_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    r.status = Resolve::not_regular;
    r.detail = "is not a regular file";
    return r;
  }
  r.status = Resolve::ok;
  return r;
}

}  // namespace sanctum::security

#pragma once
// The adapters one served model offers unmerged, per request ("model": "BASE:NAME"). Loads and binds
// happen outside the lock, and the set is swapped only once every new adapter has bound, so a bad
// adapter leaves the old set serving; a request holds its adapter's shared_ptr from admission to its
// end, so an unload or replace never pulls an adapter from under a running sequence.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "model/blocks/row_lora.h"
#include "model/model.h"

namespace sanctum::server {

// The manifest gate for adapters loaded while serving (--lora-manifest): each adapter directory holds
// `adapter.sha256` (sanctum manifest generate DIR), signed as `adapter.sha256.sig` when a public key
// is given; the adapter is read from the files its check hashed.
struct LoraGate {
  bool required = false;
  std::string public_key;  // empty: the manifest is checked unsigned
  static constexpr const char* kManifest = "adapter.sha256";
};

struct LoraEntry {
  std::string path;
  std::shared_ptr<const ServedLora> lora;
};

class LoraRegistry {
 public:
  // max_loras: adapters resident at most (more is refused, naming --max-loras); max_rank: the
  // largest rank bound (--max-lora-rank).
  LoraRegistry(const Model& model, int64_t max_loras, int64_t max_rank, LoraGate gate = {})
      : model_(model), max_loras_(max_loras), max_rank_(max_rank), gate_(std::move(gate)) {}

  // The adapter named `name`, or null.
  std::shared_ptr<const ServedLora> find(const std::string& name) const;
  std::map<std::string, LoraEntry> list() const;
  size_t size() const;

  // Each throws sanctum::Error saying why and leaves the set as it was: load (a name already
  // loaded, a full set, an adapter that fails to load or bind), unload (an unknown name), replace
  // (an unknown name, a new adapter that fails).
  void load(const std::string& name, const std::string& path);
  void unload(const std::string& name);
  void replace(const std::string& name, const std::string& path);
  // Makes the set exactly `wanted` (name -> path): adapters whose path is unchanged stay as they are,
  // new or changed ones are loaded first, then the set is swapped whole. Returns what changed, for logs.
  std::string apply(const std::map<std::string, std::string>& wanted);

 private:
  std::shared_ptr<const ServedLora> bind(const std::string& name, const std::string& path) const;
  void check_name(const std::string& name) const;

  const Model& model_;
  int64_t max_loras_ = 0, max_rank_ = 0;
  LoraGate gate_;
  mutable std::mutex mutex_;
  std::map<std::string, LoraEntry> entries_;
};

}  // namespace sanctum::server

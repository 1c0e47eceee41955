#include "server/lora_registry.h"

#include <optional>

#include "base/error.h"
#include "security/gate.h"
#include "weights/adapters/lora_adapter.h"

namespace sanctum::server {

std::shared_ptr<const ServedLora> LoraRegistry::find(const std::string& name) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second.lora;
}

std::map<std::string, LoraEntry> LoraRegistry::list() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return entries_;
}

size_t LoraRegistry::size() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

void LoraRegistry::check_name(const std::string& name) const {
  check(!name.empty() && name.find_first_of(":/ \t") == std::string::npos, ErrorKind::invalid_argument,
        "adapter name '" + name + "': use a non-empty name without ':', '/' or spaces (requests name it as MODEL:NAME)");
}

std::shared_ptr<const ServedLora> LoraRegistry::bind(const std::string& name, const std::string& path) const {
  check_name(name);
  check(!path.empty(), ErrorKind::invalid_argument, "adapter '" + name + "': no path given (the adapter's directory)");
  if (!gate_.required) return model_.bind_lora(name, LoraAdapter::load(path), max_rank_);
  const std::string manifest = path + "/" + LoraGate::kManifest;
  std::optional<std::string> key;
  if (!gate_.public_key.empty()) key = gate_.public_key;
  security::VerifyReport report = security::verify_model_against_manifest(path, manifest, std::nullopt, key);
  return model_.bind_lora(name, LoraAdapter::load(path, &report.pinned), max_rank_);
}

void LoraRegistry::load(const std::string& name, const std::string& path) {
  check_name(name);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    check(!entries_.contains(name), ErrorKind::invalid_argument,
          "adapter '" + name + "' is already loaded; use \"action\": \"replace\" to swap it");
  }
  auto lora = bind(name, path);  // outside the lock: requests keep resolving meanwhile
  const std::lock_guard<std::mutex> lock(mutex_);
  check(!entries_.contains(name), ErrorKind::invalid_argument, "adapter '" + name + "' was loaded meanwhile");
  check(static_cast<int64_t>(entries_.size()) < max_loras_, ErrorKind::invalid_argument,
        "adapter '" + name + "': " + std::to_string(max_loras_) + " adapters are loaded, the most --max-loras allows; unload one first");
  entries_[name] = {path, std::move(lora)};
}

void LoraRegistry::unload(const std::string& name) {
  const std::lock_guard<std::mutex> lock(mutex_);
  check(entries_.erase(name) == 1, ErrorKind::not_found, "adapter '" + name + "' is not loaded");
}

void LoraRegistry::replace(const std::string& name, const std::string& path) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    check(entries_.contains(name), ErrorKind::not_found, "adapter '" + name + "' is not loaded; use \"action\": \"load\"");
  }
  auto lora = bind(name, path);
  const std::lock_guard<std::mutex> lock(mutex_);
  check(entries_.contains(name), ErrorKind::not_found, "adapter '" + name + "' was unloaded meanwhile");
  entries_[name] = {path, std::move(lora)};
}

std::string LoraRegistry::apply(const std::map<std::string, std::string>& wanted) {
  check(static_cast<int64_t>(wanted.size()) <= max_loras_, ErrorKind::invalid_argument,
        std::to_string(wanted.size()) + " adapters listed, more than --max-loras " + std::to_string(max_loras_));
  const std::map<std::string, LoraEntry> before = list();
  std::map<std::string, LoraEntry> next;
  std::string changes;
  for (const auto& [name, path] : wanted) {
    auto it = before.find(name);
    if (it != before.end() && it->second.path == path) {
      next[name] = it->second;
      continue;
    }
    next[name] = {path, bind(name, path)};
    changes += (changes.empty() ? "" : ", ") + std::string(it == before.end() ? "loaded " : "replaced ") + name;
  }
  for (const auto& [name, entry] : before)
    if (!wanted.contains(name)) changes += (changes.empty() ? "" : ", ") + std::string("unloaded ") + name;
  const std::lock_guard<std::mutex> lock(mutex_);
  entries_ = std::move(next);
  return changes.empty() ? "unchanged" : changes;
}

}  // namespace sanctum::server

#include "grammar/mask_store.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/repeat_profile.h"

namespace sanctum::grammar {

namespace {
// The hash node, its bucket and the shared_ptr control block beside each entry.
constexpr size_t kEntryOverheadBytes = 96;
constexpr auto kRelaxed = std::memory_order_relaxed;
}  // namespace

template <class T>
std::shared_ptr<const T> MaskStore::find(const Map<T>& map, std::string_view key) const {
  std::shared_lock lock(mutex_);
  auto it = map.find(key);
  if (it == map.end()) return nullptr;
  // Stamped only when it changes: a hot entry's line is not written on every lookup.
  const uint64_t now = clock_.load(kRelaxed);
  if (it->second.used.load(kRelaxed) != now) it->second.used.store(now, kRelaxed);
  return it->second.value;
}

std::shared_ptr<const PositionMask> MaskStore::find_mask(std::string_view key) const { return find(masks_, key); }

std::shared_ptr<const RepeatProfile> MaskStore::find_profile(std::string_view key) const { return find(profiles_, key); }

template <class T>
std::shared_ptr<const T> MaskStore::add(Map<T>& map, std::string_view key, std::shared_ptr<const T> value, size_t value_bytes) {
  const size_t bytes = value_bytes + sizeof(T) + key.size() + sizeof(Entry<T>) + kEntryOverheadBytes;
  std::unique_lock lock(mutex_);
  if (auto it = map.find(key); it != map.end()) return it->second.value;
  if (bytes > budget_) return value;
  auto [it, inserted] = map.try_emplace(std::string(key));
  it->second.value = value;
  it->second.bytes = bytes;
  it->second.used.store(clock_.fetch_add(1, kRelaxed) + 1, kRelaxed);
  bytes_.store(bytes_.load(kRelaxed) + bytes, kRelaxed);
  if (bytes_.load(kRelaxed) > budget_) evict_locked(budget_ / 4 * 3, value.get());
  return value;
}

std::shared_ptr<const PositionMask> MaskStore::add_mask(std::string_view key, std::shared_ptr<const PositionMask> mask) {
  const size_t bytes = mask->memory_bytes();
  return add(masks_, key, std::move(mask), bytes);
}

std::shared_ptr<const RepeatProfile> MaskStore::add_profile(std::string_view key, std::shared_ptr<const RepeatProfile> profile) {
  const size_t bytes = profile->memory_bytes();
  return add(profiles_, key, std::move(profile), bytes);
}

void MaskStore::evict_locked(size_t target, const void* keep) {
  struct Victim {
    uint64_t used;
    bool profile;
    const std::string* key;  // the map's own, valid until its entry is erased
  };
  std::vector<Victim> victims;
  victims.reserve(masks_.size() + profiles_.size());
  for (const auto& [key, e] : masks_)
    if (e.value.get() != keep) victims.push_back({e.used.load(kRelaxed), false, &key});
  for (const auto& [key, e] : profiles_)
    if (e.value.get() != keep) victims.push_back({e.used.load(kRelaxed), true, &key});
  std::sort(victims.begin(), victims.end(), [](const Victim& a, const Victim& b) { return a.used < b.used; });
  size_t total = bytes_.load(kRelaxed);
  // A profile still held by a stored mask (or by a mask being built) would stay alive uncounted:
  // it goes only after the masks that hold it, if the budget still asks for it.
  auto drop_profile = [&](const std::string& key) {
    auto it = profiles_.find(key);
    if (it->second.value.use_count() > 1) return false;
    total -= it->second.bytes;
    profiles_.erase(it);
    ++evicted_;
    return true;
  };
  std::vector<const std::string*> deferred;
  for (const Victim& v : victims) {
    if (total <= target) break;
    if (v.profile) {
      if (!drop_profile(*v.key)) deferred.push_back(v.key);
      continue;
    }
    auto it = masks_.find(*v.key);
    total -= it->second.bytes;
    masks_.erase(it);
    ++evicted_;
  }
  for (const std::string* key : deferred) {
    if (total <= target) break;
    drop_profile(*key);
  }
  bytes_.store(total, kRelaxed);
}

MaskStore::Stats MaskStore::stats() const {
  Stats s;
  std::shared_lock lock(mutex_);
  for (const auto& [key, e] : masks_) {
    ++s.masks;
    s.mask_bytes += e.value->memory_bytes();
    s.uncertain_tokens += e.value->uncertain.size();
  }
  for (const auto& [key, e] : profiles_) {
    ++s.profiles;
    s.profile_bytes += e.value->memory_bytes();
  }
  s.evicted = evicted_;
  return s;
}

}  // namespace sanctum::grammar

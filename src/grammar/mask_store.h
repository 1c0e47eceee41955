#pragma once
// The context masks and repeat profiles of one compiled grammar, under a byte budget. Entries are
// immutable and handed out as shared_ptr: evicting one drops only the store's reference, so a matcher
// that holds a mask (and a mask that holds its profile) keeps it valid until it lets go, and the next
// use of that context computes the same mask again. A generation scheme would save the reference
// counts but must learn when every matcher of the grammar has left its step; a fill takes a few dozen
// references beside the hash lookups it makes anyway.
// Recency is a tick stamped on each hit under the shared lock (a relaxed store, no list to splice),
// so matchers never serialize on lookups. An insert that passes the budget evicts the least recently
// stamped entries down to three quarters of it: the sort that finds them is paid once per quarter
// budget of new entries. A profile goes only once no stored mask refers to it, so the bytes the store
// counts are the bytes it keeps alive. Thread-safe.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace sanctum::grammar {

struct PositionMask;
struct RepeatProfile;

class MaskStore {
 public:
  explicit MaskStore(size_t budget_bytes) : budget_(budget_bytes) {}

  // The value under `key`, or null (never computed, or evicted since).
  std::shared_ptr<const PositionMask> find_mask(std::string_view key) const;
  std::shared_ptr<const RepeatProfile> find_profile(std::string_view key) const;
  // Stores a value computed outside the lock and returns what the store holds under `key`: another
  // thread's if it stored first. A value bigger than the budget is returned without being stored.
  std::shared_ptr<const PositionMask> add_mask(std::string_view key, std::shared_ptr<const PositionMask> mask);
  std::shared_ptr<const RepeatProfile> add_profile(std::string_view key, std::shared_ptr<const RepeatProfile> profile);

  struct Stats {
    size_t masks = 0, mask_bytes = 0, uncertain_tokens = 0;  // bytes: the masks' own, as PositionMask::memory_bytes
    size_t profiles = 0, profile_bytes = 0;
    size_t evicted = 0;  // entries dropped for the budget so far
  };
  Stats stats() const;
  // Everything the store counts against its budget: values, keys and per-entry overhead.
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  size_t budget_bytes() const { return budget_; }

 private:
  template <class T>
  struct Entry {
    std::shared_ptr<const T> value;
    size_t bytes = 0;
    mutable std::atomic<uint64_t> used{0};
  };
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  template <class T>
  using Map = std::unordered_map<std::string, Entry<T>, KeyHash, std::equal_to<>>;

  template <class T>
  std::shared_ptr<const T> find(const Map<T>& map, std::string_view key) const;
  template <class T>
  std::shared_ptr<const T> add(Map<T>& map, std::string_view key, std::shared_ptr<const T> value, size_t value_bytes);
  // Drops the least recently used entries (never `keep`) until the bytes are at most `target`.
  void evict_locked(size_t target, const void* keep);

  const size_t budget_;
  mutable std::shared_mutex mutex_;
  Map<PositionMask> masks_;
  Map<RepeatProfile> profiles_;
  std::atomic<uint64_t> clock_{0};
  std::atomic<size_t> bytes_{0};
  size_t evicted_ = 0;
};

}  // namespace sanctum::grammar

#include "engine/prefix_cache.h"

#include <algorithm>

namespace sanctum {

namespace {
int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<int64_t>(ia - a.begin());
}

constexpr int64_t kHeadFlag = int64_t{1} << 30;

bool is_image_head(int32_t token) { return PrefixCache::is_image_key(token) && ((-1 - int64_t{token}) & kHeadFlag) != 0; }

// Whether restoring `entry`'s snapshot at `usable` tokens of `prompt` is exact (see the header).
bool reusable_at(std::span<const int32_t> entry, std::span<const int32_t> prompt, int64_t usable) {
  if (usable <= 0) return false;
  const auto at = static_cast<size_t>(usable);
  if (at < prompt.size() && is_image_head(prompt[at]) && is_image_head(prompt[at - 1])) return false;  // inside an image's head
  return std::none_of(entry.begin() + usable, entry.end(), PrefixCache::is_image_key);                 // cut short across an image
}
}  // namespace

int32_t PrefixCache::image_key(std::span<const uint8_t, 32> hash, int64_t index) {
  const auto word = [&](int64_t w) {
    const auto b = static_cast<size_t>(w % 8) * 4;
    return static_cast<uint32_t>(hash[b]) | static_cast<uint32_t>(hash[b + 1]) << 8 | static_cast<uint32_t>(hash[b + 2]) << 16 |
           static_cast<uint32_t>(hash[b + 3]) << 24;
  };
  int64_t x = 0;
  if (index < kImageHeadTokens) {
    x = kHeadFlag | (word(index) & (kHeadFlag - 1));
  } else {  // the rest repeat the hash's words, mixed with the index so that no two keys of a run are alike
    const uint64_t mixed = (uint64_t{word(index)} ^ static_cast<uint64_t>(index)) * 0x9E3779B97F4A7C15ull;
    x = static_cast<int64_t>(mixed >> 34);  // 30 bits
  }
  return static_cast<int32_t>(-1 - x);
}

PrefixCache::Hit PrefixCache::find(std::span<const int32_t> prompt) const {
  const int64_t cap = static_cast<int64_t>(prompt.size()) - kMinRecomputed;
  Hit best;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& e : entries_) {
    const int64_t len = static_cast<int64_t>(e.tokens.size());
    const int64_t lcp = std::min(common_prefix(e.tokens, prompt), cap);
    const int64_t usable = e.snapshot->has_recurrent_state() ? (len <= lcp ? len : 0) : lcp;
    if (usable > best.tokens && reusable_at(e.tokens, prompt, usable)) best = {e.snapshot, usable, e.serial};
  }
  return best;
}

int64_t PrefixCache::acquire(const Model& model, std::span<const int32_t> prompt, SequenceState& state,
                             std::shared_ptr<const SequenceState>* from, const Hit* found) {
  const Hit hit = found != nullptr ? *found : find(prompt);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (hit.snapshot) {
      auto it = std::ranges::find_if(entries_, [&](const Entry& e) { return e.snapshot == hit.snapshot; });
      if (it != entries_.end()) entries_.splice(entries_.begin(), entries_, it);  // most recently used
      ++stats_.hits;
      stats_.reused_tokens += hit.tokens;
    } else {
      ++stats_.misses;
    }
  }
  if (from) *from = hit.snapshot;
  if (!hit.snapshot) {
    state = model.new_state();
    return 0;
  }
  state.restore(*hit.snapshot, hit.tokens);
  return hit.tokens;
}

int64_t PrefixCache::aligned_point(int64_t tokens) { return std::max<int64_t>(0, tokens - kMinRecomputed) / kAlign * kAlign; }

std::vector<int64_t> PrefixCache::snapshot_points(const SequenceState& state, int64_t prompt_tokens) {
  if (!state.has_recurrent_state()) return {};
  const int64_t point = aligned_point(prompt_tokens);
  if (point <= state.length()) return {};
  return {point};
}

std::shared_ptr<const SequenceState> PrefixCache::store(std::span<const int32_t> tokens, const SequenceState& state) {
  const int64_t len = state.length();
  if (len <= 0 || static_cast<int64_t>(tokens.size()) < len || max_bytes_ == 0) return nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (std::ranges::equal(it->tokens, tokens.first(static_cast<size_t>(len)))) {  // already held: refresh its recency
        entries_.splice(entries_.begin(), entries_, it);
        return it->snapshot;
      }
    }
  }
  return store(tokens, state.snapshot());
}

std::shared_ptr<const SequenceState> PrefixCache::store(std::span<const int32_t> tokens, std::shared_ptr<const SequenceState> snap) {
  const int64_t len = snap ? snap->length() : 0;
  if (len <= 0 || static_cast<int64_t>(tokens.size()) < len || max_bytes_ == 0) return nullptr;
  size_t whole = 0;  // what it holds even if nothing else stays in the pool
  snap->for_each_buffer([&](const void*, size_t bytes) { whole += bytes; });
  if (whole > max_bytes_) return nullptr;
  Entry e{std::vector<int32_t>(tokens.begin(), tokens.begin() + len), snap};
  std::lock_guard<std::mutex> lock(mutex_);
  e.serial = ++serials_;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->tokens == e.tokens) {
      entries_.splice(entries_.begin(), entries_, it);
      return it->snapshot;
    }
  }
  add(e);
  entries_.push_front(std::move(e));
  evict_to_fit();
  // Evicted at once when even the newest entry does not fit beside buffers it cannot drop.
  return !entries_.empty() && entries_.front().snapshot == snap ? snap : nullptr;
}

void PrefixCache::set_max_bytes(size_t max_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_bytes_ = max_bytes;
  evict_to_fit();
}

bool PrefixCache::holds_extension(std::span<const int32_t> tokens) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& e : entries_)
    if (e.tokens.size() >= tokens.size() && std::equal(tokens.begin(), tokens.end(), e.tokens.begin())) return true;
  return false;
}

void PrefixCache::erase(std::span<const int32_t> tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (std::ranges::equal(it->tokens, tokens)) {
      remove(*it);
      entries_.erase(it);
      return;
    }
  }
}

void PrefixCache::add(const Entry& e) {
  e.snapshot->for_each_buffer([&](const void* id, size_t bytes) {
    if (id == nullptr) {
      stats_.bytes += bytes;
      return;
    }
    Buffer& b = buffers_[id];
    if (b.entries++ == 0) {
      b.bytes = bytes;
      stats_.bytes += bytes;
    } else {
      stats_.shared_bytes += bytes;
    }
  });
}

void PrefixCache::remove(const Entry& e) {
  e.snapshot->for_each_buffer([&](const void* id, size_t bytes) {
    if (id == nullptr) {
      stats_.bytes -= bytes;
      return;
    }
    auto it = buffers_.find(id);
    if (--it->second.entries == 0) {
      stats_.bytes -= it->second.bytes;
      buffers_.erase(it);
    } else {
      stats_.shared_bytes -= bytes;
    }
  });
}

void PrefixCache::evict_to_fit() {
  while (stats_.bytes > max_bytes_ && !entries_.empty()) {
    remove(entries_.back());
    entries_.pop_back();
  }
}

size_t PrefixCache::recount_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::unordered_map<const void*, size_t> buffers;
  size_t unshared = 0;
  for (const Entry& e : entries_)
    e.snapshot->for_each_buffer([&](const void* id, size_t bytes) {
      if (id) buffers[id] = bytes;
      else unshared += bytes;
    });
  for (const auto& [id, bytes] : buffers) unshared += bytes;
  return unshared;
}

PrefixCacheStats PrefixCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PrefixCacheStats s = stats_;
  s.entries = entries_.size();
  return s;
}

}  // namespace sanctum

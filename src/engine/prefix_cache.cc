#include "engine/prefix_cache.h"

#include <algorithm>

namespace sanctum {

namespace {
constexpr int64_t kMinRecomputed = 2;  // T_q >= 2
constexpr int64_t kAlign = 64;          // GatedDeltaNet chunk size (see blocks/gated_delta_net.h)

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<int64_t>(ia - a.begin());
}
}  // namespace

int64_t PrefixCache::acquire(const Model& model, std::span<const int32_t> prompt, SequenceState& state) {
  const int64_t cap = static_cast<int64_t>(prompt.size()) - kMinRecomputed;
  std::shared_ptr<const SequenceState> best;
  int64_t best_len = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto best_it = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      const int64_t len = static_cast<int64_t>(it->tokens.size());
      const int64_t lcp = std::min(common_prefix(it->tokens, prompt), cap);
      const int64_t usable = it->snapshot->has_recurrent_state() ? (len <= lcp ? len : 0) : lcp;
      if (usable > best_len) {
        best_len = usable;
        best_it = it;
      }
    }
    if (best_it != entries_.end()) {
      entries_.splice(entries_.begin(), entries_, best_it);  // most recently used
      best = best_it->snapshot;
      ++stats_.hits;
      stats_.reused_tokens += best_len;
    } else {
      ++stats_.misses;
    }
  }
  if (!best) {
    state = model.new_state();
    return 0;
  }
  state.restore(*best, best_len);
  return best_len;
}

std::vector<int64_t> PrefixCache::snapshot_points(const SequenceState& state, int64_t prompt_tokens) {
  if (!state.has_recurrent_state()) return {};
  // The last aligned position that a later prompt extending this one can reuse (T_q >= 2 included).
  const int64_t point = (prompt_tokens - kMinRecomputed) / kAlign * kAlign;
  if (point <= state.length()) return {};
  return {point};
}

void PrefixCache::store(std::span<const int32_t> tokens, const SequenceState& state) {
  const int64_t len = state.length();
  if (len <= 0 || static_cast<int64_t>(tokens.size()) < len || max_bytes_ == 0) return;
  std::vector<int32_t> key(tokens.begin(), tokens.begin() + len);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->tokens == key) {  // already held: refresh its recency
        entries_.splice(entries_.begin(), entries_, it);
        return;
      }
    }
  }
  auto snap = state.snapshot();
  size_t whole = 0;  // what it holds even if nothing else stays in the pool
  snap->for_each_buffer([&](const void*, size_t bytes) { whole += bytes; });
  if (whole > max_bytes_) return;
  Entry e{std::move(key), snap};
  std::lock_guard<std::mutex> lock(mutex_);
  add(e);
  entries_.push_front(std::move(e));
  evict_to_fit();
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

PrefixCacheStats PrefixCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PrefixCacheStats s = stats_;
  s.entries = entries_.size();
  return s;
}

}  // namespace sanctum

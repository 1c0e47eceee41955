#include "grammar/state_mask_cache.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "grammar/vocabulary.h"

namespace sanctum::grammar {

namespace {
// A flip list is kept while it is at most a quarter of the bitset: smaller, and cheap to replay.
constexpr size_t kFlipsPerWord = 4;
// The list node, index node and shared_ptr control block beside each entry.
constexpr size_t kEntryOverheadBytes = 96;

// Appends the ids whose bit differs between `mask` and `base` (null: all zero).
void collect_flips(std::span<const uint32_t> mask, const uint32_t* base, std::vector<uint32_t>& out) {
  for (size_t w = 0; w < mask.size(); ++w)
    for (uint32_t bits = mask[w] ^ (base ? base[w] : 0u); bits; bits &= bits - 1)
      out.push_back(static_cast<uint32_t>(w * 32 + static_cast<size_t>(std::countr_zero(bits))));
}

size_t count_flips(std::span<const uint32_t> mask, const uint32_t* base) {
  size_t n = 0;
  for (size_t w = 0; w < mask.size(); ++w) n += static_cast<size_t>(std::popcount(mask[w] ^ (base ? base[w] : 0u)));
  return n;
}
}  // namespace

size_t StateMaskCache::Entry::bytes() const { return sizeof(Entry) + kEntryOverheadBytes + (key.size() + data.size()) * sizeof(uint32_t); }

uint64_t StateMaskCache::hash_key(std::span<const uint32_t> key) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ key.size();
  for (uint32_t w : key) {
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  return h;
}

std::shared_ptr<const StateMaskCache::Entry> StateMaskCache::encode(uint64_t hash, std::span<const uint32_t> key,
                                                                    std::span<const uint32_t> mask, const Vocabulary& vocab) {
  auto e = std::make_shared<Entry>();
  e->hash = hash;
  e->key.assign(key.begin(), key.end());
  const uint32_t* ordinary = vocab.ordinary_mask().data();
  const size_t limit = mask.size() / kFlipsPerWord;
  const size_t from_none = count_flips(mask, nullptr);
  const size_t from_ordinary = count_flips(mask, ordinary);
  if (std::min(from_none, from_ordinary) <= limit) {
    const bool none = from_none <= from_ordinary;
    e->form = none ? Form::flips_from_none : Form::flips_from_ordinary;
    e->data.reserve(none ? from_none : from_ordinary);
    collect_flips(mask, none ? nullptr : ordinary, e->data);
  } else {
    e->form = Form::bitset;
    e->data.assign(mask.begin(), mask.end());
  }
  return e;
}

bool StateMaskCache::find(std::span<const uint32_t> key, std::span<uint32_t> mask, const Vocabulary& vocab) {
  if (budget_ == 0 || key.size() > kMaxKeyWords) return false;
  const uint64_t hash = hash_key(key);
  std::shared_ptr<const Entry> e;
  {
    std::lock_guard lock(mutex_);
    auto it = index_.find(hash);
    // A different state under the same hash is a miss (its entry stays).
    if (it == index_.end() || !std::equal(key.begin(), key.end(), (*it->second)->key.begin(), (*it->second)->key.end())) {
      ++misses_;
      return false;
    }
    ++hits_;
    e = *it->second;
    lru_.splice(lru_.begin(), lru_, it->second);
  }
  // Decoded outside the lock: the entry is immutable and held by `e`.
  const size_t words = vocab.mask_words();
  switch (e->form) {
    case Form::bitset: std::memcpy(mask.data(), e->data.data(), words * sizeof(uint32_t)); break;
    case Form::flips_from_none: std::memset(mask.data(), 0, words * sizeof(uint32_t)); break;
    case Form::flips_from_ordinary: std::memcpy(mask.data(), vocab.ordinary_mask().data(), words * sizeof(uint32_t)); break;
  }
  if (e->form != Form::bitset)
    for (uint32_t id : e->data) mask[id / 32] ^= uint32_t{1} << (id % 32);
  return true;
}

void StateMaskCache::insert(std::span<const uint32_t> key, std::span<const uint32_t> mask, const Vocabulary& vocab) {
  if (budget_ == 0 || key.size() > kMaxKeyWords) return;
  const uint64_t hash = hash_key(key);
  {
    std::lock_guard lock(mutex_);
    if (index_.count(hash)) return;  // another matcher stored it first (or a hash collision keeps the older)
  }
  // Encoded outside the lock (a pass over the mask); a racing insert of the same state is dropped below.
  auto e = encode(hash, key, mask, vocab);
  const size_t size = e->bytes();
  if (size > budget_) return;
  std::lock_guard lock(mutex_);
  if (index_.count(hash)) return;
  lru_.push_front(std::move(e));
  index_.emplace(hash, lru_.begin());
  bytes_ += size;
  while (bytes_ > budget_) {
    const auto& old = lru_.back();
    bytes_ -= old->bytes();
    index_.erase(old->hash);
    lru_.pop_back();
  }
}

size_t StateMaskCache::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

size_t StateMaskCache::entries() const {
  std::lock_guard lock(mutex_);
  return lru_.size();
}

size_t StateMaskCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

size_t StateMaskCache::misses() const {
  std::lock_guard lock(mutex_);
  return misses_;
}

}  // namespace sanctum::grammar

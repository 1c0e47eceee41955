#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "base/error.h"
#include "base/utf8.h"

namespace sanctum {
namespace {

constexpr size_t kCacheCapacity = 65536;
constexpr size_t kCacheMaxWord = 64;
constexpr size_t kLinearScanLimit = 48;  // words with more symbols use the heap

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

struct Symbol {
  int32_t id;
  int32_t prev, next;
  bool alive;
};

}  // namespace

size_t StringHash::operator()(std::string_view s) const noexcept {
  // FNV-1a, 64-bit: short keys, fast enough and stable.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

Bpe::Bpe(const std::vector<std::pair<std::string, int32_t>>& vocab, const std::vector<std::pair<std::string, std::string>>& merges,
         Options options)
    : options_(std::move(options)) {
  vocab_.reserve(vocab.size());
  for (const auto& [token, id] : vocab) vocab_.emplace(token, id);
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& [left, right] : merges) {
    const int32_t a = find(left), b = find(right), r = find(left + right);
    if (a < 0 || b < 0 || r < 0)
      fail(ErrorKind::invalid_input, "tokenizer.json: merge '" + left + " " + right + "' uses a token missing from the vocab");
    merges_.try_emplace(pair_key(a, b), rank, r);
    ++rank;
  }
  init_tables();
}

Bpe::Bpe(TokenMap vocab, std::vector<Merge> merges, Options options) : options_(std::move(options)), vocab_(std::move(vocab)) {
  merges_.reserve(merges.size());
  for (const Merge& m : merges) {
    auto [it, inserted] = merges_.try_emplace(pair_key(m.left, m.right), m.rank, m.result);
    if (!inserted && m.rank < it->second.first) it->second = {m.rank, m.result};
  }
  init_tables();
}

void Bpe::init_tables() {
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_fallback_[b] = find(name);
  }
  if (!options_.unk_token.empty()) {
    unk_id_ = find(options_.unk_token);
    if (unk_id_ < 0) fail(ErrorKind::invalid_input, "tokenizer.json: unk_token '" + options_.unk_token + "' is not in the vocab");
  }
}

int32_t Bpe::find(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

void Bpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    const int32_t id = find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWord;
  if (cacheable) {
    std::unique_lock lock(cache_mutex_, std::try_to_lock);
    if (lock.owns_lock()) {
      auto it = cache_.find(word);
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
  }
  const size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::unique_lock lock(cache_mutex_, std::try_to_lock);
    if (lock.owns_lock() && cache_.size() < kCacheCapacity) cache_.emplace(word, std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  // 1. Initial symbols: one per byte (raw_bytes) or per code point; unknown ones fall back to bytes or unk.
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  auto add = [&](int32_t id) {
    const int32_t n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, n + 1, true});
  };
  int32_t pending_unk = -1;  // fused unknown run not yet emitted
  size_t i = 0;
  while (i < word.size()) {
    const size_t start = i;
    int32_t id;
    if (options_.raw_bytes) {
      id = byte_ids_[static_cast<uint8_t>(word[i])];
      ++i;
    } else {
      const size_t n = std::max<size_t>(1, utf8::sequence_length(static_cast<uint8_t>(word[i])));
      i = std::min(word.size(), i + n);
      id = find(word.substr(start, i - start));
    }
    if (id >= 0) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (size_t k = start; k < i; ++k) all = all && byte_fallback_[static_cast<uint8_t>(word[k])] >= 0;
      if (all) {
        for (size_t k = start; k < i; ++k) add(byte_fallback_[static_cast<uint8_t>(word[k])]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk >= 0 && !options_.fuse_unk) add(pending_unk);
      pending_unk = unk_id_;
    }
  }
  if (pending_unk >= 0) add(pending_unk);
  if (sym.empty()) return;
  sym.back().next = -1;

  auto rank_of = [&](int32_t a, int32_t b, int32_t* result) -> int32_t {
    auto it = merges_.find(pair_key(a, b));
    if (it == merges_.end()) return -1;
    *result = it->second.second;
    return it->second.first;
  };

  // 2. Merge. Short words: rescan for the lowest (rank, position). Long words: a heap of candidate pairs.
  if (sym.size() <= kLinearScanLimit) {
    while (true) {
      int32_t best_rank = INT32_MAX, best_pos = -1, best_result = -1;
      for (int32_t p = 0; p != -1 && sym[p].next != -1; p = sym[p].next) {
        int32_t result = -1;
        const int32_t r = rank_of(sym[p].id, sym[sym[p].next].id, &result);
        if (r >= 0 && r < best_rank) best_rank = r, best_pos = p, best_result = result;
      }
      if (best_pos < 0) break;
      const int32_t nx = sym[best_pos].next;
      sym[best_pos].id = best_result;
      sym[best_pos].next = sym[nx].next;
      if (sym[nx].next != -1) sym[sym[nx].next].prev = best_pos;
      sym[nx].alive = false;
    }
  } else {
    struct Candidate {
      int32_t rank, pos, left, right;
      bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    auto push = [&](int32_t p) {
      if (p < 0 || sym[p].next < 0) return;
      int32_t result = -1;
      const int32_t r = rank_of(sym[p].id, sym[sym[p].next].id, &result);
      if (r >= 0) heap.push({r, p, sym[p].id, sym[sym[p].next].id});
    };
    for (int32_t p = 0; p + 1 < static_cast<int32_t>(sym.size()); ++p) push(p);
    while (!heap.empty()) {
      const Candidate c = heap.top();
      heap.pop();
      // Stale when either side changed since the candidate was pushed.
      if (!sym[c.pos].alive || sym[c.pos].id != c.left || sym[c.pos].next < 0 || sym[sym[c.pos].next].id != c.right) continue;
      int32_t result = -1;
      rank_of(c.left, c.right, &result);
      const int32_t nx = sym[c.pos].next;
      sym[c.pos].id = result;
      sym[c.pos].next = sym[nx].next;
      if (sym[nx].next != -1) sym[sym[nx].next].prev = c.pos;
      sym[nx].alive = false;
      push(sym[c.pos].prev);
      push(c.pos);
    }
  }
  for (int32_t p = 0; p != -1; p = sym[p].next) out.push_back(sym[p].id);
}

}  // namespace sanctum

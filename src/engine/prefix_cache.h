#pragma once
// Prompt-cache reuse: sequences seen before are kept as immutable state snapshots; a new prompt
// continues from the longest cached prefix it shares, so only its suffix is prefilled.
// - At least 2 prompt tokens are always recomputed (T_q >= 2): a one-token suffix takes a different
//   attention path in some backends and the last prompt row must be computed anyway.
// - Attention-only models reuse any prefix of a snapshot (KV rows are truncated). A recurrent
//   (GatedDeltaNet) state cannot be truncated, so a hybrid snapshot is usable only at exactly its
//   own length; hybrids therefore snapshot at 64-token-aligned positions, where the chunked
//   recurrence gives the same bits as a prefill from scratch: the last aligned point of each prompt
//   while it is prefilled, and, after the generation, the last aligned point of prompt + output
//   (rebuilt by prefill from the prompt's snapshot: see TailSnapshot in cached_generation.h).
// - Snapshots are never mutated: a hit restores a copy-on-write view (KV rows are shared until
//   written, the recurrent state is copied), so no request sees another's state change.
// - The pool is bounded in bytes, each KV buffer counted once however many snapshots share it (the
//   turns of one conversation do); the least recently used entries are evicted first.
// - Prompts with images are keyed by their images' content: each placeholder token becomes a negative
//   id made from the image's hash (image_key), so the same placeholders with another image never match.
//   The first kImageHeadTokens keys of an image carry 30 bits of its 256-bit hash each; a prefix that
//   would end among them is not reused (too few bits compared), nor is an attention-only snapshot cut
//   short across an image (the rotary offset an image leaves is known only at its end).
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/model.h"

namespace sanctum {

struct PrefixCacheStats {
  int64_t hits = 0, misses = 0;
  int64_t reused_tokens = 0;  // prompt tokens served from the cache
  size_t bytes = 0;           // held by snapshots now, shared KV buffers counted once
  size_t entries = 0;
  size_t shared_bytes = 0;  // what snapshot sharing saves: bytes that deep copies would add
};

class PrefixCache {
 public:
  explicit PrefixCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  static constexpr int64_t kMinRecomputed = 2;    // T_q >= 2
  static constexpr int64_t kAlign = 64;           // GatedDeltaNet chunk size (see blocks/gated_delta_net.h)
  static constexpr int64_t kImageHeadTokens = 8;  // 8 x 30 bits of an image's hash

  // The key of the placeholder token `index` (from 0) of an image whose content hash is `hash`.
  static int32_t image_key(std::span<const uint8_t, 32> hash, int64_t index);
  static bool is_image_key(int32_t token) { return token < 0; }

  // What a prompt can continue: a snapshot and how many of its leading tokens to restore (none: no
  // snapshot, 0 tokens), and the entry's serial number (from 1, never reused; 0: none).
  struct Hit {
    std::shared_ptr<const SequenceState> snapshot;
    int64_t tokens = 0;
    uint64_t entry = 0;
  };
  // The entry acquire() would restore for `prompt`, without restoring it, counting it or refreshing
  // its recency (admission looks ahead with it).
  Hit find(std::span<const int32_t> prompt) const;

  // Prepares `state` (fresh or restored) for `prompt`; returns how many leading prompt tokens it
  // already holds. The caller prefills prompt[returned..]. `from` (optional) receives the snapshot
  // the state was restored from (null when it starts empty). `found` (optional): what find() gave
  // for this prompt, restored even if the entry was evicted since.
  int64_t acquire(const Model& model, std::span<const int32_t> prompt, SequenceState& state,
                  std::shared_ptr<const SequenceState>* from = nullptr, const Hit* found = nullptr);

  // The last aligned position that a later prompt extending a sequence of `tokens` tokens can
  // reuse on a hybrid model (T_q >= 2 included); 0 when there is none.
  static int64_t aligned_point(int64_t tokens);

  // Positions at which a sequence being prefilled with `prompt` should be snapshotted (empty for
  // attention-only models, which snapshot at the end instead).
  static std::vector<int64_t> snapshot_points(const SequenceState& state, int64_t prompt_tokens);

  // Keeps a snapshot of `state`, whose first state.length() tokens are tokens[0..length). Returns
  // the snapshot the pool now holds for those tokens (an earlier one when they were held already),
  // or null when it cannot hold one (the pool is too small for it).
  std::shared_ptr<const SequenceState> store(std::span<const int32_t> tokens, const SequenceState& state);
  // The same for a snapshot already taken (snapshot->length() tokens of `tokens`).
  std::shared_ptr<const SequenceState> store(std::span<const int32_t> tokens, std::shared_ptr<const SequenceState> snapshot);

  // Whether an entry holds `tokens` and possibly more after them: a snapshot at tokens.size() or
  // beyond on the same sequence (work to build one at tokens.size() is then moot).
  bool holds_extension(std::span<const int32_t> tokens) const;
  // Drops the entry for exactly `tokens`, if any (a stepping stone that a longer snapshot replaced).
  void erase(std::span<const int32_t> tokens);

  PrefixCacheStats stats() const;
  size_t max_bytes() const { return max_bytes_; }
  // A new bound: entries are evicted, least recently used first, until the pool fits under it.
  void set_max_bytes(size_t max_bytes);
  // stats().bytes counted again from scratch over the entries held (a check on the accounting).
  size_t recount_bytes() const;

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::shared_ptr<const SequenceState> snapshot;
    uint64_t serial = 0;  // Hit::entry
  };
  struct Buffer {
    size_t bytes = 0;
    int entries = 0;  // pool entries whose snapshot references it
  };
  void add(const Entry& e);
  void remove(const Entry& e);
  void evict_to_fit();

  std::atomic<size_t> max_bytes_;
  uint64_t serials_ = 0;  // the last Entry::serial given
  mutable std::mutex mutex_;
  std::list<Entry> entries_;                         // most recently used first
  std::unordered_map<const void*, Buffer> buffers_;  // shared KV buffers of the held snapshots
  PrefixCacheStats stats_;
};

}  // namespace sanctum

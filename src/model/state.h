#pragma once
// Per-sequence model state (DESIGN decision 3): one KV cache per full-attention layer (and, for
// hybrid models, conv + recurrent state per GatedDeltaNet layer). Prompt-cache reuse and
// speculative rollback go only through this API, so the KV cache and the recurrent state can never
// be rolled back separately.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "ops/kv_format.h"
#include "tensor/row_memory.h"
#include "tensor/tensor.h"

namespace sanctum {

struct ServedLora;

// K and V rows of one attention layer: (capacity, n_kv_heads, head_dim) in the cache dtype's formats
// (ops/kv_format.h: f32, bf16, or 8/4-bit codes with per-block scales), grown in blocks.
//
// The rows live in address space reserved for `reserve_tokens` rows (the model's context) and
// backed a block at a time (tensor/row_memory.h: HostRows on the CPU, DeviceRows on a GPU that
// maps granules): growing storage that no snapshot shares never copies and never holds an old and
// a new buffer at once. On a GPU the blocks are the driver's granules (1,024 or 2,048 rows of the
// usual layers: commit_rows()). Past the reservation, or on a GPU that cannot map granules (or for
// rows so small that a granule would hold more than DeviceRows::kMaxGranuleRows), growing moves
// the rows into new storage with room for half again as many. Rows not yet written read as zero.
//
// Storage is shared copy-on-write between a sequence and its snapshots (share_prefix): a prompt
// cache holding every turn of a conversation holds one buffer per layer, not one per turn. Rows
// below a storage's `frozen` mark belong to some snapshot and are never written again; at most one
// handle (the writer) writes rows at or above it in place. Any other handle about to write
// (reserve) first moves its rows [0, rows()) into storage of its own, which maps the shared rows'
// whole pages or granules and copies only the rest (RowMemory::share), so concurrent sequences
// continuing one prompt-cache entry, or the n choices of one request, hold its prefix once (where
// storage cannot map, the rows are copied). Attention kernels keep reading contiguous rows.
class KvCache {
 public:
  static constexpr int64_t kBlockTokens = 256;
  // The CPU reservation when none is given.
  static constexpr int64_t kDefaultReserveTokens = 32768;

  KvCache() = default;
  // dtype: the process-wide --kv-cache-dtype (ops::kv_cache_dtype()) unless given. reserve_tokens:
  // the rows a cache grows to in place (0: kDefaultReserveTokens); address space only.
  KvCache(int64_t n_kv_heads, int64_t head_dim, Device device = Device::cpu, ops::KvCacheDtype dtype = ops::kv_cache_dtype(),
          int64_t reserve_tokens = 0);
  // A copy reads the same rows but never gets the right to write them in place.
  KvCache(const KvCache& other);
  KvCache& operator=(const KvCache& other);
  KvCache(KvCache&& other) noexcept;
  KvCache& operator=(KvCache&& other) noexcept;
  ~KvCache();

  // Rows allocated (committed, on the CPU): whole blocks.
  int64_t capacity() const { return storage_ ? storage_->capacity.load(std::memory_order_acquire) : 0; }
  ops::KvCacheDtype dtype() const { return dtype_; }
  // Makes rows [0, tokens) exist and rows [rows(), tokens) writable by this handle: grows in
  // blocks, and copies rows [0, rows()) into storage of its own first when a snapshot still needs
  // the rows to be written (copy-on-write). Call it before every write.
  void reserve(int64_t tokens);
  // Rows this handle holds (the sequence length; kept up to date by SequenceState).
  int64_t rows() const { return rows_; }
  // Views of rows [0, n) as stored: (n, n_kv_heads, head_dim) for f32 and bf16.
  ops::KvRows keys(int64_t n) const;
  ops::KvRows values(int64_t n) const;
  // Rows [begin, end), for writing new tokens after reserve(); throws if the storage is shared and
  // this handle may not write it.
  ops::KvRows key_rows(int64_t begin, int64_t end) const;
  ops::KvRows value_rows(int64_t begin, int64_t end) const;
  // Bytes of the capacity() rows: what the storage has committed (the memory plan counts the same
  // whole blocks). On the CPU a page becomes resident when first written, so RSS stays below this.
  size_t bytes() const { return storage_ ? static_cast<size_t>(capacity()) * storage_->row_bytes : 0; }
  // One token's K and V rows in `dtype`, as bytes() counts them.
  static size_t bytes_per_token(int64_t n_kv_heads, int64_t head_dim, ops::KvCacheDtype dtype);
  // Rows a cache of this shape commits at a time (capacity() is a multiple): kBlockTokens, or on a
  // GPU that maps granules, whole granules when those are larger.
  static int64_t commit_rows(int64_t n_kv_heads, int64_t head_dim, Device device, ops::KvCacheDtype dtype);
  // Whether caches of this shape continuing a snapshot map its whole blocks rather than copy them
  // (the kv_shared_pages knob, and memory that can).
  static bool maps_shared_rows(int64_t n_kv_heads, int64_t head_dim, Device device, ops::KvCacheDtype dtype);
  // A handle on rows [0, n) of the same storage; no write through any handle can change them.
  KvCache share_prefix(int64_t n) const;
  // Identifies the storage: handles sharing it (snapshots) return the same.
  const void* storage_id() const { return storage_.get(); }
  // Calls fn(id, bytes) for each buffer under the rows (on the CPU, each extent of pages it maps),
  // with the same id wherever the same memory is held, shared pages included: a sum over distinct
  // ids counts memory once.
  void for_each_buffer(const std::function<void(const void*, size_t)>& fn) const;

 private:
  struct Storage {
    ops::KvRows k, v;                                // rows [0, capacity) usable; where mapped, views of the whole reservation
    std::atomic<int64_t> capacity{0};                // grown by the writer; read by any handle (bytes() on other threads)
    size_t row_bytes = 0;                            // one token's K and V rows
    std::vector<std::shared_ptr<RowMemory>> memory;  // under each tensor of k and v, in that order (none: plain device memory)
    std::mutex mutex;                                // guards frozen and writer (handles may live on different threads)
    int64_t frozen = 0;                              // rows [0, frozen) are immutable
    uint64_t writer = 0;                             // the handle allowed to write rows >= frozen in place (0: none)
  };
  friend class SequenceState;
  void set_rows(int64_t n) { rows_ = n; }
  // Storage of `capacity` rows; where rows are mapped (mapped_), in address space for `reserve` rows
  // (fewer when the kernel refuses that much). Its rows [0, keep) hold `from`'s (whole pages or
  // granules shared where mapped).
  std::shared_ptr<Storage> new_storage(int64_t capacity, int64_t reserve, const Storage* from = nullptr, int64_t keep = 0) const;
  // Commits rows up to `capacity` of a reservation; false when it is too short (or there is none).
  static bool grow_in_place(Storage& storage, int64_t capacity);
  static void copy_rows(Storage& to, const Storage& from, int64_t rows);
  // Rows [begin, end) of storage this handle writes in place: pages another storage maps are copied.
  static void make_writable(Storage& storage, int64_t begin, int64_t end);
  void check_writable() const;
  void release_writer();
  uint64_t id();

  int64_t n_kv_heads_ = 0, head_dim_ = 0;
  Device device_ = Device::cpu;
  ops::KvCacheDtype dtype_ = ops::KvCacheDtype::f32;
  int64_t reserve_tokens_ = kDefaultReserveTokens;
  bool mapped_ = true;           // storage in RowMemory (else plain device memory, grown by copying)
  int64_t unit_ = kBlockTokens;  // commit_rows()
  std::shared_ptr<Storage> storage_;
  uint64_t id_ = 0;   // this handle's writer identity (0: not assigned yet)
  int64_t rows_ = 0;  // rows [0, rows_) are this handle's
};

// Recurrent state of one GatedDeltaNet layer (filled in by hybrid architectures).
struct LinearAttentionState {
  Tensor conv;       // (conv_kernel - 1, conv_dim) f32: the last inputs of the causal conv
  Tensor recurrent;  // (n_value_heads, value_head_dim, key_head_dim) f32
};

class SequenceState {
 public:
  SequenceState() = default;
  // One entry per layer; attention layers get a KvCache, others an empty one.
  SequenceState(std::vector<KvCache> kv, std::vector<LinearAttentionState> linear) : kv_(std::move(kv)), linear_(std::move(linear)) {}

  int64_t length() const { return length_; }  // tokens already processed
  void advance(int64_t n);                    // called by the model after a forward
  // Multimodal RoPE: the next text token's rotary position minus its index (0 until an image's
  // grid positions end short of its token count; Qwen's rope_deltas). Set by the model.
  int64_t rope_delta() const { return rope_delta_; }
  void set_rope_delta(int64_t delta) { rope_delta_ = delta; }
  KvCache& kv(size_t layer) { return kv_[layer]; }
  LinearAttentionState& linear(size_t layer) { return linear_[layer]; }
  bool has_recurrent_state() const;
  // The adapter this sequence's forwards add per row (model/blocks/row_lora.h), null for the base.
  // Held here so that an unload cannot free it while the sequence runs; a snapshot carries it and a
  // restore takes it, so a fork continues on its parent's adapter.
  const ServedLora* lora() const { return lora_.get(); }
  void set_lora(std::shared_ptr<const ServedLora> lora) { lora_ = std::move(lora); }

  // Drops tokens past n. Only possible when every layer is attention (a recurrent state cannot be
  // truncated: use snapshot/restore); throws otherwise.
  void truncate(int64_t n);

  // Everything at the current length (KV rows shared copy-on-write, the recurrent state copied);
  // restore() puts it back exactly. Later writes to either side never show in the other.
  std::shared_ptr<const SequenceState> snapshot() const;
  void restore(const SequenceState& snapshot);
  // Restores only the first `length` tokens of the snapshot: any prefix for attention-only state,
  // exactly the snapshot's length when a recurrent state is present (throws otherwise).
  void restore(const SequenceState& snapshot, int64_t length);

  size_t bytes() const;  // every buffer this state references, shared ones included

  // What cannot be truncated (GatedDeltaNet conv and recurrent state) plus the length. rewind()
  // returns to it in one step: KV rows past that length are dropped and the recurrent state is
  // restored — the cheap rollback for rejected speculative drafts (no KV copy).
  struct Checkpoint {
    int64_t length = 0;
    int64_t rope_delta = 0;
    std::vector<LinearAttentionState> linear;
  };
  Checkpoint checkpoint() const;
  void checkpoint(Checkpoint& into) const;  // the same, reusing into's buffers when they fit
  void rewind(const Checkpoint& checkpoint);

  // Calls fn(id, bytes) for each KV buffer (shared ones carry the same id) and fn(nullptr, bytes)
  // for the recurrent state, which is never shared.
  template <class Fn>
  void for_each_buffer(Fn&& fn) const {
    for (const auto& kv : kv_) kv.for_each_buffer(fn);
    for (const auto& l : linear_) fn(nullptr, l.conv.nbytes() + l.recurrent.nbytes());
  }

 private:
  std::vector<KvCache> kv_;
  std::vector<LinearAttentionState> linear_;
  int64_t length_ = 0;
  int64_t rope_delta_ = 0;
  std::shared_ptr<const ServedLora> lora_;
};

}  // namespace sanctum

#pragma once
// Per-sequence model state (DESIGN decision 3): one KV cache per full-attention layer (and, for
// hybrid models, conv + recurrent state per GatedDeltaNet layer). Prompt-cache reuse and
// speculative rollback go only through this API, so the KV cache and the recurrent state can never
// be rolled back separately.
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace sanctum {

// K and V rows of one attention layer: (capacity, n_kv_heads, head_dim) f32, grown in blocks.
class KvCache {
 public:
  static constexpr int64_t kBlockTokens = 256;

  KvCache() = default;
  KvCache(int64_t n_kv_heads, int64_t head_dim, Device device = Device::cpu)
      : n_kv_heads_(n_kv_heads), head_dim_(head_dim), device_(device) {}

  int64_t capacity() const { return k_ ? k_.dim(0) : 0; }
  // Grows storage (whole blocks, existing rows kept) so rows [0, tokens) exist.
  void reserve(int64_t tokens);
  // Views of rows [0, n): (n, n_kv_heads, head_dim).
  Tensor keys(int64_t n) const { return k_.slice(0, 0, n); }
  Tensor values(int64_t n) const { return v_.slice(0, 0, n); }
  // Rows [begin, end) as 2-D (end - begin, n_kv_heads * head_dim) views, for writing new tokens.
  Tensor key_rows(int64_t begin, int64_t end) const { return k_.slice(0, begin, end).reshape({end - begin, n_kv_heads_ * head_dim_}); }
  Tensor value_rows(int64_t begin, int64_t end) const { return v_.slice(0, begin, end).reshape({end - begin, n_kv_heads_ * head_dim_}); }
  size_t bytes() const { return k_.nbytes() + v_.nbytes(); }
  KvCache clone_prefix(int64_t n) const;  // deep copy of rows [0, n)

 private:
  int64_t n_kv_heads_ = 0, head_dim_ = 0;
  Device device_ = Device::cpu;
  Tensor k_, v_;
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
  SequenceState(std::vector<KvCache> kv, std::vector<LinearAttentionState> linear)
      : kv_(std::move(kv)), linear_(std::move(linear)) {}

  int64_t length() const { return length_; }       // tokens already processed
  void advance(int64_t n) { length_ += n; }        // called by the model after a forward
  KvCache& kv(size_t layer) { return kv_[layer]; }
  LinearAttentionState& linear(size_t layer) { return linear_[layer]; }
  bool has_recurrent_state() const;

  // Drops tokens past n. Only possible when every layer is attention (a recurrent state cannot be
  // truncated: use snapshot/restore); throws otherwise.
  void truncate(int64_t n);

  // A deep copy of everything at the current length; restore() puts it back exactly.
  std::shared_ptr<const SequenceState> snapshot() const;
  void restore(const SequenceState& snapshot);
  // Restores only the first `length` tokens of the snapshot: any prefix for attention-only state,
  // exactly the snapshot's length when a recurrent state is present (throws otherwise).
  void restore(const SequenceState& snapshot, int64_t length);

  size_t bytes() const;

  // What cannot be truncated (GatedDeltaNet conv and recurrent state) plus the length. rewind()
  // returns to it in one step: KV rows past that length are dropped and the recurrent state is
  // restored — the cheap rollback for rejected speculative drafts (no KV copy).
  struct Checkpoint {
    int64_t length = 0;
    std::vector<LinearAttentionState> linear;
  };
  Checkpoint checkpoint() const;
  void rewind(const Checkpoint& checkpoint);

 private:
  std::vector<KvCache> kv_;
  std::vector<LinearAttentionState> linear_;
  int64_t length_ = 0;
};

}  // namespace sanctum

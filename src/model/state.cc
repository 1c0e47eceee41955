#include "model/state.h"

#include <cstring>

#include "base/error.h"

namespace sanctum {

void KvCache::reserve(int64_t tokens) {
  if (tokens <= capacity()) return;
  int64_t blocks = (tokens + kBlockTokens - 1) / kBlockTokens;
  int64_t cap = blocks * kBlockTokens;
  // Grow by at least half again, so long prompts fed in pieces do not copy quadratically.
  cap = std::max(cap, capacity() + capacity() / 2 / kBlockTokens * kBlockTokens);
  Tensor k = Tensor::zeros({cap, n_kv_heads_, head_dim_}, DType::f32, device_);
  Tensor v = Tensor::zeros({cap, n_kv_heads_, head_dim_}, DType::f32, device_);
  if (k_) {
    k.slice(0, 0, k_.dim(0)).copy_from(k_);
    v.slice(0, 0, v_.dim(0)).copy_from(v_);
  }
  k_ = std::move(k);
  v_ = std::move(v);
}

KvCache KvCache::clone_prefix(int64_t n) const {
  KvCache c(n_kv_heads_, head_dim_, device_);
  if (n > 0 && k_) {  // a layer without attention (or never written) has nothing to copy
    check(n <= capacity(), ErrorKind::internal, "KvCache::clone_prefix: rows beyond capacity");
    c.reserve(n);
    c.k_.slice(0, 0, n).copy_from(k_.slice(0, 0, n));
    c.v_.slice(0, 0, n).copy_from(v_.slice(0, 0, n));
  }
  return c;
}

bool SequenceState::has_recurrent_state() const {
  for (const auto& l : linear_)
    if (l.recurrent) return true;
  return false;
}

void SequenceState::truncate(int64_t n) {
  check(n >= 0 && n <= length_, ErrorKind::invalid_argument, "truncate: length out of range");
  check(!has_recurrent_state() || n == length_, ErrorKind::unsupported,
        "truncate: a recurrent (GatedDeltaNet) state cannot be truncated; restore a snapshot instead");
  length_ = n;  // rows past n are simply overwritten by the next forward
}

std::shared_ptr<const SequenceState> SequenceState::snapshot() const {
  auto s = std::make_shared<SequenceState>();
  s->length_ = length_;
  for (const auto& kv : kv_) s->kv_.push_back(kv.clone_prefix(length_));
  for (const auto& l : linear_) s->linear_.push_back({l.conv ? l.conv.clone() : Tensor{}, l.recurrent ? l.recurrent.clone() : Tensor{}});
  return s;
}

void SequenceState::restore(const SequenceState& snap) { restore(snap, snap.length_); }

void SequenceState::restore(const SequenceState& snap, int64_t length) {
  if (kv_.empty() && linear_.empty()) {  // a default-constructed state takes the snapshot's layout
    kv_.resize(snap.kv_.size());
    linear_.resize(snap.linear_.size());
  }
  check(snap.kv_.size() == kv_.size() && snap.linear_.size() == linear_.size(), ErrorKind::invalid_argument,
        "restore: snapshot belongs to a different model");
  check(length >= 0 && length <= snap.length_, ErrorKind::invalid_argument, "restore: length beyond the snapshot");
  check(length == snap.length_ || !snap.has_recurrent_state(), ErrorKind::unsupported,
        "restore: a recurrent (GatedDeltaNet) state can only be restored at its own length");
  length_ = length;
  for (size_t i = 0; i < kv_.size(); ++i) kv_[i] = snap.kv_[i].clone_prefix(length);
  for (size_t i = 0; i < linear_.size(); ++i)
    linear_[i] = {snap.linear_[i].conv ? snap.linear_[i].conv.clone() : Tensor{},
                  snap.linear_[i].recurrent ? snap.linear_[i].recurrent.clone() : Tensor{}};
}

SequenceState::Checkpoint SequenceState::checkpoint() const {
  Checkpoint c;
  c.length = length_;
  for (const auto& l : linear_) c.linear.push_back({l.conv ? l.conv.clone() : Tensor{}, l.recurrent ? l.recurrent.clone() : Tensor{}});
  return c;
}

void SequenceState::rewind(const Checkpoint& c) {
  check(c.linear.size() == linear_.size() && c.length <= length_, ErrorKind::invalid_argument,
        "rewind: checkpoint belongs to another sequence or lies ahead of it");
  length_ = c.length;
  for (size_t i = 0; i < linear_.size(); ++i) {
    if (!c.linear[i].recurrent) continue;
    linear_[i].conv.copy_from(c.linear[i].conv);
    linear_[i].recurrent.copy_from(c.linear[i].recurrent);
  }
}

size_t SequenceState::bytes() const {
  size_t b = 0;
  for (const auto& kv : kv_) b += kv.bytes();
  for (const auto& l : linear_) b += l.conv.nbytes() + l.recurrent.nbytes();
  return b;
}

}  // namespace sanctum

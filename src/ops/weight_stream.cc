#include "ops/weight_stream.h"

namespace sanctum::ops {

namespace {
thread_local WeightStream* t_current = nullptr;
}  // namespace

const WeightStream::Read* WeightStream::next_after(const Weight& w) const {
  const auto it = next_.find(key_of(w));
  return it == next_.end() ? nullptr : &it->second;
}

void WeightStream::reading(const Read& read) {
  const void* key = key_of(read.weight);
  if (last_ != nullptr) {
    Read& slot = next_[last_];
    // The same link as last step (the usual case) costs a comparison, not a copy.
    if (key_of(slot.weight) != key || slot.parts != read.parts || slot.part_tiles != read.part_tiles) slot = read;
  }
  last_ = key;
}

WeightStream::Scope::Scope(WeightStream& stream) : outer_(t_current) { t_current = &stream; }
WeightStream::Scope::~Scope() { t_current = outer_; }

WeightStream* WeightStream::current() { return t_current; }

}  // namespace sanctum::ops

#pragma once
// Where a forward's tokens sit in their sequence, as the position-dependent ops (RoPE, the KV-cache
// store, attention) take it.
#include <cstdint>
#include <span>

#include "tensor/tensor.h"

namespace sanctum::ops {

struct Positions {
  // Token i is at position host[i]; always set, consecutive.
  std::span<const int32_t> host;
  // Optional: the same positions as an i32 (n) tensor on the device. When set, the ops read the
  // positions there instead of baking the host values into their launches, so work recorded once
  // (a CUDA graph of the decode step) stays right at every later position: the host rewrites only
  // this buffer between replays, and the ops size their launches by the cache's capacity.
  const Tensor* device = nullptr;

  int64_t first() const { return host.empty() ? 0 : host.front(); }
  int64_t size() const { return static_cast<int64_t>(host.size()); }
};

}  // namespace sanctum::ops

#pragma once
// Small host arrays (token ids, positions, tables) made visible to kernels.
#include <cstdint>
#include <span>

namespace sanctum::ops::cuda {

// Where host values go: each slot has its own device buffer, reused call after call.
enum class HostSlot : int { token_ids = 0, positions = 1, source_rows = 2, target_rows = 3, count };
enum class HostFloatSlot : int { expert_weights = 0, shared_weights = 1, count };

// Copies values into the slot's device buffer (ordered on the stream, so a kernel queued earlier
// still sees the previous contents) and returns its address. Skips the copy when the slot already
// holds exactly these values (every layer of one forward passes the same positions).
const int32_t* device_ints(HostSlot slot, std::span<const int32_t> values);

// The same for float values (per-call weights).
const float* device_floats(HostFloatSlot slot, std::span<const float> values);

// A device copy of a constant float table, keyed by its host address and checked by content.
const float* device_table(std::span<const float> values);

}  // namespace sanctum::ops::cuda

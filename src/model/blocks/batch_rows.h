#pragma once
// How a batched forward's rows split into sequences. The rows of every (n, ...) activation are the
// sequences' tokens one after another; row-wise work (norms, projections, MLPs, experts) runs over
// all of them at once, so each weight is read once per step, while attention and GatedDeltaNet run
// per sequence on its own state, over that sequence's rows and positions only. Each op keeps a row's
// bits independent of the rows beside it, so a sequence comes out the same batched or alone.
#include <cstdint>
#include <span>

#include "model/mrope.h"
#include "model/state.h"
#include "ops/positions.h"

namespace sanctum {

struct SequenceRows {
  int64_t begin = 0, end = 0;      // its rows [begin, end) of the batch
  SequenceState* state = nullptr;  // at length = the position of row begin
};

struct BatchRows {
  std::span<const SequenceRows> sequences;
  ops::Positions positions;  // of every row; .device set in a recorded step
  // Multimodal rotary positions of every row (one-sequence batches only); tables null: the rotary
  // positions are `positions` (text, no image earlier in the sequence).
  MropeRows mrope;
  // A recorded step of several sequences: each one's rows of positions.device, in sequence order.
  std::span<const Tensor> device_positions;

  // Row range [begin, end)'s positions, as the position-dependent ops take them.
  ops::Positions positions_of(const SequenceRows& s) const {
    if (sequences.size() == 1) return positions;
    const auto i = static_cast<size_t>(&s - sequences.data());
    return {positions.host.subspan(static_cast<size_t>(s.begin), static_cast<size_t>(s.end - s.begin)),
            i < device_positions.size() ? &device_positions[i] : nullptr};
  }
};

}  // namespace sanctum

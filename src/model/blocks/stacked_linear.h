#pragma once
// On a GPU, projections that read the same input run as one stacked weight: one launch and one pass
// over x instead of several small mat-vecs that each wait out the memory latency (GatedDeltaNet's
// qkv / z / b / a, an MLP's gate / up). The CPU keeps the checkpoint's own tensors: stacking would
// copy weights that are otherwise mapped from the file.
#include <initializer_list>
#include <string>

#include "tensor/weight.h"
#include "weights/checkpoint.h"

namespace sanctum {

// The parts stacked in order, or an empty weight (rows 0) when they stay apart: on the CPU, when
// their formats differ, or when the model's tuning has stack_weights=0. When stacked, the parts are
// cleared and the checkpoint's copies released, so their memory goes back once the load is done. Zero rows follow
// the parts up to a multiple of row_multiple (16 lets a stack of odd row counts take the tiled
// mat-vec); their outputs are zeros that no caller reads.
Weight stack_linears(Checkpoint& ckpt, std::initializer_list<Weight*> parts, const std::string& name, int64_t row_multiple = 1);

}  // namespace sanctum

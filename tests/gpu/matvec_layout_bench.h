#pragma once
// Decode mat-vec layouts and tunings timed over a stream of distinct weights (matvec_layout_bench.cu).

namespace sanctum::test {

// Prints per-layer time and bandwidth of each variant over `layers` 27B GatedDeltaNet layers.
void matvec_layer_stream_report(int layers);

}  // namespace sanctum::test

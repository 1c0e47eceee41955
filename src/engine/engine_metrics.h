#pragma once
// The engine's Prometheus series, registered in the server's registry. The sanctum_mlx_* names are
// the ones existing dashboards query: keep them exactly as they are.
#include "base/metrics_registry.h"

namespace sanctum {

class EngineMetrics {
 public:
  explicit EngineMetrics(Registry& registry);

  Family<Counter>& inference_requests;  // {stop_reason}: stop | length | cancelled | error
  Counter& completion_tokens_total;
  Counter& prompt_tokens_total;
  Histogram& inference_duration;
  Histogram& tokens_per_sec;         // reaches 4096 tok/s (GPUs go far past the old 96)
  Histogram& completion_tokens;      // 1 .. 4096 tokens
  Family<Gauge>& queue_depth;        // {model}: requests waiting for the engine
  Family<Gauge>& running_sequences;  // {model}: sequences in the running batch
  Family<Gauge>& state_bytes;        // {model}: KV cache and recurrent state of the running sequences
  Gauge& kv_page_bytes;              // CPU KV cache pages allocated (sequences and prompt cache, shared once)
  Gauge& kv_shared_page_bytes;       // ... of which mapped by more than one holder, per extra holder
  Gauge& kv_gpu_granule_bytes;       // the same two for GPU KV cache granules (tensor/device_rows.h)
  Gauge& kv_gpu_shared_granule_bytes;
  Histogram& batch_sequences;             // sequences per forward step
  Histogram& batch_tokens;                // tokens (rows) per forward step
  Histogram& step_seconds;                // one scheduler step: forward, sampling, token hand-off
  Family<Counter>& prompt_cache_lookups;  // {result}: hit | miss
  Counter& prompt_cache_tokens;           // prompt tokens served from the cache
  Gauge& prompt_cache_bytes;              // held by cached snapshots
  Counter& tail_snapshots;                // end-of-generation snapshots stored (hybrid models)
  Counter& tail_snapshot_tokens;          // tokens those rebuilds prefilled while the engine was idle
  Gauge& tail_snapshots_pending;          // rebuilds waiting for an idle engine
  Counter& pld_drafted_tokens;            // prompt-lookup speculation: proposed
  Counter& pld_accepted_tokens;           // ... and kept
};

}  // namespace sanctum

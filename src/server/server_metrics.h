#pragma once
// The server's Prometheus series. The sanctum_mlx_* names are the ones existing dashboards query:
// keep them exactly as they are.
#include <string>

#include "server/metrics_registry.h"

namespace sanctum::server {

class ServerMetrics {
 public:
  ServerMetrics();

  Registry registry;

  Family<Counter>& http_requests;    // {route, method, status}
  Family<Histogram>& http_duration;  // {route, method, status}, 5 ms .. 180 s
  Gauge& http_inflight;
  Family<Counter>& inference_requests;  // {stop_reason}: stop | length | cancelled | error
  Counter& completion_tokens_total;
  Counter& prompt_tokens_total;
  Histogram& inference_duration;
  Histogram& tokens_per_sec;           // reaches 4096 tok/s (GPUs go far past the old 96)
  Histogram& completion_tokens;        // 1 .. 4096 tokens
  Family<Histogram>& startup_seconds;  // {phase}: manifest_verify | model_load
  Gauge& model_loaded;
  Family<Gauge>& queue_depth;  // {model}: requests waiting for the worker
  Histogram& time_to_first_token;
  Family<Counter>& prompt_cache_lookups;  // {result}: hit | miss
  Counter& prompt_cache_tokens;           // prompt tokens served from the cache
  Gauge& prompt_cache_bytes;              // held by cached snapshots
  Counter& tail_snapshots;                // end-of-generation snapshots stored (hybrid models)
  Counter& tail_snapshot_tokens;          // tokens those rebuilds prefilled while the worker was idle
  Gauge& tail_snapshots_pending;          // rebuilds waiting for an idle worker
  Counter& pld_drafted_tokens;            // prompt-lookup speculation: proposed
  Counter& pld_accepted_tokens;           // ... and kept

  // One finished HTTP request.
  void observe_http(const std::string& route, const std::string& method, int status, double seconds);
};

}  // namespace sanctum::server

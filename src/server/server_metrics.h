#pragma once
// The server's Prometheus series. The sanctum_mlx_* names are the ones existing dashboards query:
// keep them exactly as they are.
#include <string>

#include "base/metrics_registry.h"
#include "engine/engine_metrics.h"

namespace sanctum::server {

class ServerMetrics {
 public:
  ServerMetrics();

  Registry registry;

  Family<Counter>& http_requests;    // {route, method, status}
  Family<Histogram>& http_duration;  // {route, method, status}, 5 ms .. 180 s
  Gauge& http_inflight;
  Family<Histogram>& startup_seconds;  // {phase}: manifest_verify | model_load
  Gauge& model_loaded;
  Family<Gauge>& memory_plan;  // {model, part}: weights | state_bound | prompt_cache | scratch, bytes
  Histogram& time_to_first_token;
  Family<Gauge>& loras_loaded;            // {model}: adapters served per request (--lora, /admin/adapters)
  Family<Counter>& lora_requests;         // {model, adapter}: generation requests that chose the adapter
  Family<Gauge>& grammar_cache_bytes;     // {model}: cached compiled grammars with their masks (set at each scrape)
  Family<Gauge>& grammar_cache_grammars;  // {model}
  EngineMetrics engine;                   // the inference series

  // One finished HTTP request.
  void observe_http(const std::string& route, const std::string& method, int status, double seconds);
};

}  // namespace sanctum::server

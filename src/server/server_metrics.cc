#include "server/server_metrics.h"

namespace sanctum::server {

namespace {
std::vector<double> http_buckets() { return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 180}; }
}  // namespace

ServerMetrics::ServerMetrics()
    : http_requests(
          registry.counter("sanctum_mlx_http_requests_total", "HTTP requests by route, method and status.", {"route", "method", "status"})),
      http_duration(registry.histogram("sanctum_mlx_http_duration_seconds", "HTTP request duration in seconds.", http_buckets(),
                                       {"route", "method", "status"})),
      http_inflight(registry.gauge("sanctum_mlx_http_inflight_requests", "HTTP requests being handled now.").with({})),
      startup_seconds(registry.histogram("sanctum_mlx_startup_seconds", "Start-up phase durations in seconds.",
                                         {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}, {"phase"})),
      model_loaded(registry.gauge("sanctum_mlx_model_loaded", "1 when every configured model is loaded and serving.").with({})),
      memory_plan(registry.gauge("sanctum_memory_plan_bytes", "A served model's planned memory by part (0 state_bound: unbounded).",
                                 {"model", "part"})),
      time_to_first_token(registry
                              .histogram("sanctum_mlx_inference_time_to_first_token_seconds",
                                         "Time from request arrival to the first generated token.",
                                         {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60})
                              .with({})),
      loras_loaded(registry.gauge("sanctum_lora_adapters_loaded", "Adapters a model serves per request (BASE:NAME).", {"model"})),
      lora_requests(
          registry.counter("sanctum_lora_requests_total", "Generation requests by the adapter they chose.", {"model", "adapter"})),
      grammar_cache_bytes(registry.gauge("sanctum_grammar_cache_bytes",
                                         "Bytes held by a model's cached compiled grammars: the grammars and their token masks.",
                                         {"model"})),
      grammar_cache_grammars(registry.gauge("sanctum_grammar_cache_grammars", "Compiled grammars a model keeps for reuse.", {"model"})),
      engine(registry) {
  add_build_info(registry);
}

void ServerMetrics::observe_http(const std::string& route, const std::string& method, int status, double seconds) {
  std::vector<std::string> labels{route, method, std::to_string(status)};
  http_requests.with(labels).inc();
  http_duration.with(labels).observe(seconds);
}

}  // namespace sanctum::server

#include "server/server_metrics.h"

namespace sanctum::server {

namespace {
std::vector<double> http_buckets() { return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 180}; }
std::vector<double> duration_buckets() { return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}; }
}  // namespace

ServerMetrics::ServerMetrics()
    : http_requests(
          registry.counter("sanctum_mlx_http_requests_total", "HTTP requests by route, method and status.", {"route", "method", "status"})),
      http_duration(registry.histogram("sanctum_mlx_http_duration_seconds", "HTTP request duration in seconds.", http_buckets(),
                                       {"route", "method", "status"})),
      http_inflight(registry.gauge("sanctum_mlx_http_inflight_requests", "HTTP requests being handled now.").with({})),
      inference_requests(registry.counter("sanctum_mlx_inference_requests_total", "Finished generations by stop reason.", {"stop_reason"})),
      completion_tokens_total(registry.counter("sanctum_mlx_inference_completion_tokens_total", "Generated tokens.").with({})),
      prompt_tokens_total(registry.counter("sanctum_mlx_inference_prompt_tokens_total", "Prompt tokens processed.").with({})),
      inference_duration(registry
                             .histogram("sanctum_mlx_inference_duration_seconds",
                                        "Time from the worker taking a request to its last token.", duration_buckets())
                             .with({})),
      tokens_per_sec(registry
                         .histogram("sanctum_mlx_inference_tokens_per_sec", "Decode speed per request (tokens/s).",
                                    {0.5, 1, 2, 4, 8, 16, 32, 64, 96, 128, 256, 512, 1024, 2048, 4096})
                         .with({})),
      completion_tokens(
          registry.histogram("sanctum_mlx_inference_completion_tokens", "Generated tokens per request.", exponential_buckets(1, 2, 13))
              .with({})),
      startup_seconds(registry.histogram("sanctum_mlx_startup_seconds", "Start-up phase durations in seconds.",
                                         {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}, {"phase"})),
      model_loaded(registry.gauge("sanctum_mlx_model_loaded", "1 when every configured model is loaded and serving.").with({})),
      queue_depth(registry.gauge("sanctum_mlx_inference_queue_depth", "Requests waiting for a model's worker.", {"model"})),
      time_to_first_token(registry
                              .histogram("sanctum_mlx_inference_time_to_first_token_seconds",
                                         "Time from request arrival to the first generated token.",
                                         {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60})
                              .with({})),
      prompt_cache_lookups(registry.counter("sanctum_mlx_prompt_cache_lookups_total", "Prompt-cache lookups by result.", {"result"})),
      prompt_cache_tokens(
          registry.counter("sanctum_mlx_prompt_cache_tokens_total", "Prompt tokens served from the prompt cache instead of prefilled.")
              .with({})),
      prompt_cache_bytes(registry.gauge("sanctum_mlx_prompt_cache_bytes", "Bytes held by prompt-cache snapshots.").with({})),
      tail_snapshots(registry
                         .counter("sanctum_prompt_cache_tail_snapshots_total",
                                  "End-of-generation snapshots stored (hybrid models, built while the worker is idle).")
                         .with({})),
      tail_snapshot_tokens(registry
                               .counter("sanctum_prompt_cache_tail_snapshot_tokens_total",
                                        "Tokens prefilled while idle to build end-of-generation snapshots.")
                               .with({})),
      tail_snapshots_pending(
          registry.gauge("sanctum_prompt_cache_tail_snapshots_pending", "End-of-generation snapshots waiting for an idle worker.")
              .with({})),
      pld_drafted_tokens(
          registry.counter("sanctum_mlx_pld_drafted_tokens_total", "Prompt-lookup speculation: draft tokens proposed.").with({})),
      pld_accepted_tokens(
          registry.counter("sanctum_mlx_pld_accepted_tokens_total", "Prompt-lookup speculation: draft tokens accepted.").with({})) {
  add_build_info(registry);
}

void ServerMetrics::observe_http(const std::string& route, const std::string& method, int status, double seconds) {
  std::vector<std::string> labels{route, method, std::to_string(status)};
  http_requests.with(labels).inc();
  http_duration.with(labels).observe(seconds);
}

}  // namespace sanctum::server

#include "router/router_metrics.h"

namespace sanctum::router {

namespace {
std::vector<double> latency_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180};
}
}  // namespace

RouterMetrics::RouterMetrics()
    : http_requests(registry.counter("sanctum_router_http_requests_total", "Requests the router answered, by route, method and status.",
                                     {"route", "method", "status"})),
      http_duration(registry.histogram("sanctum_router_http_duration_seconds", "Time from arrival to the end of the answer.",
                                       latency_buckets(), {"route"})),
      inflight(registry.gauge("sanctum_router_inflight_requests", "Requests being handled now.").with({})),
      requests(registry.counter("sanctum_router_requests_total",
                                "Proxied requests by the backend and upstream that answered (\"-\" when none did) and status.",
                                {"backend", "upstream", "status"})),
      attempts(registry.counter("sanctum_router_upstream_attempts_total",
                                "Tries of an upstream by outcome: ok, http_4xx, http_5xx, connect_error, timeout, closed, "
                                "bad_response, quality, stream_broken, cancelled.",
                                {"backend", "upstream", "outcome"})),
      failovers(registry.counter("sanctum_router_failovers_total", "Requests moved on from an upstream to the next, by reason.",
                                 {"backend", "upstream", "reason"})),
      breaker_state(registry.gauge("sanctum_router_breaker_state", "Circuit breaker per upstream: 0 closed, 1 half-open, 2 open.",
                                   {"backend", "upstream"})),
      breaker_transitions(
          registry.counter("sanctum_router_breaker_transitions_total", "Circuit breaker state changes.", {"backend", "upstream", "state"})),
      ema_seconds(registry.gauge("sanctum_router_upstream_ema_seconds",
                                 "Latency EMA per upstream: ttft (time to the first byte) and total.", {"backend", "upstream", "kind"})),
      slow(registry.gauge("sanctum_router_upstream_slow", "1 when an upstream's latency EMA flags it slow.", {"backend", "upstream"})),
      upstream_healthy(registry.gauge("sanctum_router_upstream_healthy", "1 when the last health probe of this URL succeeded.",
                                      {"backend", "upstream"})),
      backend_healthy(registry.gauge("sanctum_router_backend_healthy", "1 when any URL of the backend is healthy.", {"backend"})),
      degraded(registry.gauge("sanctum_router_upstream_degraded", "1 while an upstream is skipped for failing a quality check or canary.",
                              {"backend", "upstream"})),
      quality_flags(registry.counter("sanctum_router_quality_flags_total",
                                     "Responses flagged by a detector: empty, repetition, utf8, canary.",
                                     {"backend", "upstream", "detector"})),
      budget_rejections(registry.counter("sanctum_router_budget_rejections_total",
                                         "Requests refused with 429 for an exhausted budget (scope client or backend).",
                                         {"scope", "backend"})),
      health_checks(registry.counter("sanctum_router_health_checks_total", "Health probes by result.", {"backend", "upstream", "result"})),
      canary_checks(
          registry.counter("sanctum_router_canary_checks_total", "Canary questions by result.", {"backend", "upstream", "result"})),
      time_to_first_byte(registry.histogram("sanctum_router_time_to_first_byte_seconds",
                                            "Arrival at the router to the first response byte sent to the client.", latency_buckets(),
                                            {"backend"})),
      tokens(registry.counter("sanctum_router_tokens_total", "Prompt + completion tokens of relayed responses.", {"backend"})) {
  add_build_info(registry);
}

}  // namespace sanctum::router

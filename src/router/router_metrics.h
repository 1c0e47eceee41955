#pragma once
// The router's Prometheus series (sanctum_router_*). Upstream labels are the configured URLs and
// backend names, so the series stay bounded by the config; client identities never become labels.
#include "server/metrics_registry.h"

namespace sanctum::router {

struct RouterMetrics {
  RouterMetrics();

  server::Registry registry;
  server::Family<server::Counter>& http_requests;    // {route, method, status}: everything the front answered
  server::Family<server::Histogram>& http_duration;  // {route}
  server::Gauge& inflight;
  server::Family<server::Counter>& requests;              // {backend, upstream, status}: proxied requests by who answered
  server::Family<server::Counter>& attempts;              // {backend, upstream, outcome}
  server::Family<server::Counter>& failovers;             // {backend, upstream, reason}: moved on from this upstream
  server::Family<server::Gauge>& breaker_state;           // {backend, upstream}: 0 closed, 1 half-open, 2 open
  server::Family<server::Counter>& breaker_transitions;   // {backend, upstream, state}
  server::Family<server::Gauge>& ema_seconds;             // {backend, upstream, kind}: kind = ttft | total
  server::Family<server::Gauge>& slow;                    // {backend, upstream}
  server::Family<server::Gauge>& upstream_healthy;        // {backend, upstream}
  server::Family<server::Gauge>& backend_healthy;         // {backend}
  server::Family<server::Gauge>& degraded;                // {backend, upstream}
  server::Family<server::Counter>& quality_flags;         // {backend, upstream, detector}
  server::Family<server::Counter>& budget_rejections;     // {scope, backend}: scope = client | backend
  server::Family<server::Counter>& health_checks;         // {backend, upstream, result}
  server::Family<server::Counter>& canary_checks;         // {backend, upstream, result}
  server::Family<server::Histogram>& time_to_first_byte;  // {backend}: router arrival -> first byte to the client
  server::Family<server::Counter>& tokens;                // {backend}: prompt + completion tokens relayed
};

}  // namespace sanctum::router

#pragma once
// The router's Prometheus series (sanctum_router_*). Upstream labels are the configured URLs and
// backend names, so the series stay bounded by the config; client identities never become labels.
#include "base/metrics_registry.h"

namespace sanctum::router {

struct RouterMetrics {
  RouterMetrics();

  Registry registry;
  Family<Counter>& http_requests;    // {route, method, status}: everything the front answered
  Family<Histogram>& http_duration;  // {route}
  Gauge& inflight;
  Family<Counter>& requests;              // {backend, upstream, status}: proxied requests by who answered
  Family<Counter>& attempts;              // {backend, upstream, outcome}
  Family<Counter>& failovers;             // {backend, upstream, reason}: moved on from this upstream
  Family<Gauge>& breaker_state;           // {backend, upstream}: 0 closed, 1 half-open, 2 open
  Family<Counter>& breaker_transitions;   // {backend, upstream, state}
  Family<Gauge>& ema_seconds;             // {backend, upstream, kind}: kind = ttft | total
  Family<Gauge>& slow;                    // {backend, upstream}
  Family<Gauge>& upstream_healthy;        // {backend, upstream}
  Family<Gauge>& backend_healthy;         // {backend}
  Family<Gauge>& degraded;                // {backend, upstream}
  Family<Counter>& quality_flags;         // {backend, upstream, detector}
  Family<Counter>& budget_rejections;     // {scope, backend}: scope = client | backend
  Family<Counter>& health_checks;         // {backend, upstream, result}
  Family<Counter>& canary_checks;         // {backend, upstream, result}
  Family<Histogram>& time_to_first_byte;  // {backend}: router arrival -> first byte to the client
  Family<Counter>& tokens;                // {backend}: prompt + completion tokens relayed
};

}  // namespace sanctum::router

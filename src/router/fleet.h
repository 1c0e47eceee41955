#pragma once
// The router's live picture of its upstreams: per URL a connection pool, circuit breaker, latency
// EMAs, health and degradation; per backend a budget. Request threads ask it for an ordered plan
// and report outcomes; the prober updates health and canary results. Every state change is logged
// and mirrored in the metrics.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "router/budget.h"
#include "router/circuit_breaker.h"
#include "router/latency_ema.h"
#include "router/quality.h"
#include "router/router_config.h"
#include "router/router_metrics.h"
#include "router/upstream_pool.h"
#include "router/upstream_tls.h"

namespace sanctum::router {

struct BackendState;

struct UpstreamState {
  UpstreamState(const BackendState& backend, size_t index, const UpstreamUrl& url, std::shared_ptr<const UpstreamTls> tls,
                const BackendConfig& config, RouterMetrics& metrics);

  const BackendState& backend;
  size_t index;       // 0: the primary; 1..: fallback_urls in order
  std::string label;  // the URL as configured (logs, metric labels)
  UpstreamPool pool;
  CircuitBreaker breaker;
  LatencyEma ttft;
  LatencyEma total;
  std::atomic<bool> healthy{true};  // optimistic until the first probe says otherwise
  std::atomic<bool> health_known{false};
  std::atomic<bool> slow{false};

  // Degradation: a quality failure skips the upstream for recovery_s; a failed canary until one passes.
  bool degraded(std::chrono::steady_clock::time_point now) const;
  std::string degraded_reason() const;

  // Metric children (label values fixed at start).
  Gauge& breaker_gauge;
  Gauge& healthy_gauge;
  Gauge& degraded_gauge;
  Gauge& slow_gauge;
  Gauge& ema_ttft_gauge;
  Gauge& ema_total_gauge;

 private:
  friend class Fleet;
  mutable std::mutex mutex_;
  std::chrono::steady_clock::time_point quality_until_{};
  std::string quality_reason_;
  bool canary_failing_ = false;
  std::string canary_reason_;
};

struct BackendState {
  explicit BackendState(const BackendConfig& c) : config(c) {}
  const BackendConfig& config;
  std::vector<std::unique_ptr<UpstreamState>> upstreams;
  std::unique_ptr<BudgetWindow> budget;  // null: unlimited
};

class Fleet {
 public:
  using Clock = std::chrono::steady_clock;
  Fleet(const RouterConfig& config, RouterMetrics& metrics);

  const RouterConfig& config() const { return config_; }
  std::vector<std::unique_ptr<BackendState>>& backends() { return backends_; }

  // The upstreams to try for a served model, in order. Equivalent backends (all serving the model)
  // are ordered by their fastest eligible upstream's TTFT EMA; inside a backend the primary comes
  // before its fallbacks, except that upstreams flagged slow go last. Ineligible ones (breaker open,
  // degraded, failed health probe) are left out; when that leaves nothing, upstreams that only
  // failed a health probe are tried as a last resort (the probe may be stale).
  std::vector<UpstreamState*> plan(const std::string& model, Clock::time_point now);

  // Outcomes of an attempt the breaker admitted.
  void on_success(UpstreamState& u, double ttft_s, double total_s);
  void on_failure(UpstreamState& u, const std::string& reason);
  void on_abandon(UpstreamState& u);
  // Admission through the breaker (logs the open -> half-open move).
  bool admit(UpstreamState& u, Clock::time_point now);

  // Quality: flag a response; the upstream is skipped for the backend's recovery_s.
  void flag_quality(UpstreamState& u, QualityFlag flag, const std::string& detail);
  // Canary and health results from the prober.
  void set_canary(UpstreamState& u, bool passed, const std::string& detail);
  void set_health(UpstreamState& u, bool healthy, const std::string& detail);

  RouterMetrics& metrics() { return metrics_; }

 private:
  void breaker_moved(UpstreamState& u, CircuitBreaker::State to, const std::string& why);
  void update_slow(const BackendState& b);
  void refresh_backend_health(const BackendState& b);

  const RouterConfig& config_;
  RouterMetrics& metrics_;
  std::vector<std::unique_ptr<BackendState>> backends_;
};

}  // namespace sanctum::router

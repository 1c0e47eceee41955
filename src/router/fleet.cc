#include "router/fleet.h"

#include <algorithm>
#include <cstdio>

#include "base/log.h"

namespace sanctum::router {

namespace {
std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", s);
  return buf;
}
}  // namespace

UpstreamState::UpstreamState(const BackendState& b, size_t i, const UpstreamUrl& url, std::shared_ptr<const UpstreamTls> tls,
                             const BackendConfig& config, RouterMetrics& m)
    : backend(b), index(i), label(url.text), pool(url, std::move(tls), config.max_idle_connections), breaker(config.breaker),
      ttft(config.latency.alpha), total(config.latency.alpha), breaker_gauge(m.breaker_state.with({config.name, url.text})),
      healthy_gauge(m.upstream_healthy.with({config.name, url.text})), degraded_gauge(m.degraded.with({config.name, url.text})),
      slow_gauge(m.slow.with({config.name, url.text})), ema_ttft_gauge(m.ema_seconds.with({config.name, url.text, "ttft"})),
      ema_total_gauge(m.ema_seconds.with({config.name, url.text, "total"})) {
  healthy_gauge.set(1);
}

bool UpstreamState::degraded(std::chrono::steady_clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return canary_failing_ || now < quality_until_;
}

std::string UpstreamState::degraded_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (canary_failing_) return "canary: " + canary_reason_;
  if (std::chrono::steady_clock::now() < quality_until_) return quality_reason_;
  return "";
}

Fleet::Fleet(const RouterConfig& config, RouterMetrics& metrics) : config_(config), metrics_(metrics) {
  for (const BackendConfig& bc : config_.backends) {
    auto b = std::make_unique<BackendState>(bc);
    std::shared_ptr<const UpstreamTls> tls;
    bool any_https = false;
    for (const auto& u : bc.urls) any_https = any_https || u.tls;
    if (any_https) {
      tls = std::make_shared<UpstreamTls>(bc.tls.value_or(UpstreamTlsConfig{}), "backends." + bc.name + ".tls");
      if (bc.tls && !bc.tls->verify)
        log::warn("upstream certificate verification is OFF for this backend (tls.verify: false)", {{"backend", bc.name}});
    }
    for (size_t i = 0; i < bc.urls.size(); ++i)
      b->upstreams.push_back(std::make_unique<UpstreamState>(*b, i, bc.urls[i], tls, bc, metrics_));
    if (!bc.budget.unlimited()) b->budget = std::make_unique<BudgetWindow>(bc.budget);
    metrics_.backend_healthy.with({bc.name}).set(1);
    backends_.push_back(std::move(b));
  }
}

std::vector<UpstreamState*> Fleet::plan(const std::string& model, Clock::time_point now) {
  struct Candidate {
    BackendState* backend;
    std::vector<UpstreamState*> ups;
    double score;
  };
  std::vector<Candidate> eligible;
  std::vector<UpstreamState*> last_resort;
  for (size_t bi : config_.backends_for(model)) {
    BackendState& b = *backends_[bi];
    Candidate c{&b, {}, 0};
    std::vector<UpstreamState*> slow;
    std::optional<double> best;
    for (auto& up : b.upstreams) {
      if (up->degraded(now) || !up->breaker.would_allow(now)) continue;
      if (!up->healthy.load()) {
        last_resort.push_back(up.get());
        continue;
      }
      (up->slow.load() ? slow : c.ups).push_back(up.get());
      const auto e = up->ttft.value();
      const double v = e ? *e : 0.0;  // unmeasured: tried first, so it gets measured
      best = best ? std::min(*best, v) : v;
    }
    c.ups.insert(c.ups.end(), slow.begin(), slow.end());
    c.score = best.value_or(0);
    if (!c.ups.empty()) eligible.push_back(std::move(c));
  }
  std::stable_sort(eligible.begin(), eligible.end(), [](const Candidate& a, const Candidate& b) { return a.score < b.score; });
  std::vector<UpstreamState*> out;
  for (auto& c : eligible) out.insert(out.end(), c.ups.begin(), c.ups.end());
  if (out.empty()) out = std::move(last_resort);
  return out;
}

bool Fleet::admit(UpstreamState& u, Clock::time_point now) {
  std::optional<CircuitBreaker::State> moved;
  const bool ok = u.breaker.allow(now, &moved);
  if (moved) breaker_moved(u, *moved, "cool-down over: one probe request may go");
  return ok;
}

void Fleet::breaker_moved(UpstreamState& u, CircuitBreaker::State to, const std::string& why) {
  u.breaker_gauge.set(static_cast<double>(static_cast<int>(to)));
  metrics_.breaker_transitions.with({u.backend.config.name, u.label, to_string(to)}).inc();
  const auto level = to == CircuitBreaker::State::open ? log::Level::warn : log::Level::info;
  log::write(level, "circuit breaker", {{"backend", u.backend.config.name}, {"upstream", u.label}, {"state", to_string(to)}, {"why", why}});
}

void Fleet::on_success(UpstreamState& u, double ttft_s, double total_s) {
  if (auto moved = u.breaker.on_success()) breaker_moved(u, *moved, "a request succeeded");
  u.ttft.observe(ttft_s);
  u.total.observe(total_s);
  if (auto v = u.ttft.value()) u.ema_ttft_gauge.set(*v);
  if (auto v = u.total.value()) u.ema_total_gauge.set(*v);
  update_slow(u.backend);
}

void Fleet::on_failure(UpstreamState& u, const std::string& reason) {
  if (auto moved = u.breaker.on_failure(Clock::now()))
    breaker_moved(u, *moved, std::to_string(u.breaker.consecutive_failures()) + " consecutive failures, last: " + reason);
}

void Fleet::on_abandon(UpstreamState& u) { u.breaker.on_abandon(); }

void Fleet::update_slow(const BackendState& b) {
  // Equivalents: every upstream of every backend that serves one of this backend's models.
  std::vector<UpstreamState*> peers;
  for (const auto& other : backends_) {
    bool shares = false;
    for (const auto& m : other->config.models)
      shares = shares || std::find(b.config.models.begin(), b.config.models.end(), m) != b.config.models.end();
    if (shares)
      for (auto& up : other->upstreams) peers.push_back(up.get());
  }
  for (UpstreamState* up : peers) {
    const auto mine = up->ttft.value();
    const auto mine_total = up->total.value();
    if (!mine) continue;
    std::optional<double> best;
    for (UpstreamState* other : peers) {
      if (other == up) continue;
      if (auto v = other->ttft.value()) best = best ? std::min(*best, *v) : *v;
    }
    const LatencyConfig& lc = up->backend.config.latency;
    const bool slow =
        is_slow(*mine, best, lc.slow_factor, lc.slow_ttft_s) || (mine_total && lc.slow_total_s > 0 && *mine_total > lc.slow_total_s);
    if (slow != up->slow.exchange(slow)) {
      up->slow_gauge.set(slow ? 1 : 0);
      log::write(slow ? log::Level::warn : log::Level::info, slow ? "upstream flagged slow" : "upstream no longer slow",
                 {{"backend", up->backend.config.name},
                  {"upstream", up->label},
                  {"ttft_ema_s", fmt_seconds(*mine)},
                  {"best_equivalent_s", best ? fmt_seconds(*best) : "-"}});
    }
  }
}

void Fleet::flag_quality(UpstreamState& u, QualityFlag flag, const std::string& detail) {
  metrics_.quality_flags.with({u.backend.config.name, u.label, to_string(flag)}).inc();
  const double recovery = u.backend.config.quality.recovery_s;
  {
    std::lock_guard<std::mutex> lock(u.mutex_);
    u.quality_until_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(recovery));
    u.quality_reason_ = std::string(to_string(flag)) + ": " + detail;
  }
  u.degraded_gauge.set(1);
  log::warn("upstream degraded: response failed a quality check", {{"backend", u.backend.config.name},
                                                                   {"upstream", u.label},
                                                                   {"detector", to_string(flag)},
                                                                   {"detail", detail},
                                                                   {"skipped_for_s", fmt_seconds(recovery)}});
}

void Fleet::set_canary(UpstreamState& u, bool passed, const std::string& detail) {
  metrics_.canary_checks.with({u.backend.config.name, u.label, passed ? "pass" : "fail"}).inc();
  bool changed;
  {
    std::lock_guard<std::mutex> lock(u.mutex_);
    changed = u.canary_failing_ == passed;
    u.canary_failing_ = !passed;
    u.canary_reason_ = detail;
  }
  if (!passed) metrics_.quality_flags.with({u.backend.config.name, u.label, "canary"}).inc();
  u.degraded_gauge.set(u.degraded(Clock::now()) ? 1 : 0);
  if (changed)
    log::write(passed ? log::Level::info : log::Level::warn,
               passed ? "upstream recovered: canary passed" : "upstream degraded: canary failed",
               {{"backend", u.backend.config.name}, {"upstream", u.label}, {"detail", detail}});
}

void Fleet::set_health(UpstreamState& u, bool healthy, const std::string& detail) {
  metrics_.health_checks.with({u.backend.config.name, u.label, healthy ? "ok" : "fail"}).inc();
  const bool was = u.healthy.exchange(healthy);
  const bool known = u.health_known.exchange(true);
  u.healthy_gauge.set(healthy ? 1 : 0);
  // Keep the degraded gauge current too: quality degradation expires on its own.
  u.degraded_gauge.set(u.degraded(Clock::now()) ? 1 : 0);
  if (was != healthy || !known)
    log::write(healthy ? log::Level::info : log::Level::warn, healthy ? "upstream healthy" : "upstream unhealthy",
               {{"backend", u.backend.config.name}, {"upstream", u.label}, {"detail", detail}});
  refresh_backend_health(u.backend);
}

void Fleet::refresh_backend_health(const BackendState& b) {
  bool any = false;
  for (const auto& up : b.upstreams) any = any || up->healthy.load();
  metrics_.backend_healthy.with({b.config.name}).set(any ? 1 : 0);
}

}  // namespace sanctum::router

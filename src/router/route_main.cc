#include "router/route_main.h"

#include <cstdio>

#include "base/error.h"
#include "base/log.h"
#include "router/fleet.h"
#include "router/prober.h"
#include "router/router_app.h"
#include "server/listener.h"
#include "server/process_lifecycle.h"

namespace sanctum::router {

std::string describe(const RouterConfig& config) {
  std::string out;
  size_t urls = 0;
  for (const auto& b : config.backends) urls += b.urls.size();
  out += std::to_string(config.backends.size()) + " backends, " + std::to_string(urls) + " upstream URLs, " +
         std::to_string(config.aliases.size()) + " aliases\n";
  for (const auto& b : config.backends) {
    out += "  " + b.name + " (tier " + b.tier + "): models";
    for (const auto& m : b.models) out += " " + m;
    out += "; ";
    for (size_t i = 0; i < b.urls.size(); ++i) out += (i ? " -> " : "") + b.urls[i].text;
    if (b.canary.enabled) out += "; canary every " + std::to_string(static_cast<int>(b.canary.interval_s)) + "s";
    out += "\n";
  }
  return out;
}

int run_router(RouterConfig config, const RouteOverrides& overrides) {
  if (overrides.hosts) config.listen.hosts = *overrides.hosts;
  if (overrides.port) config.listen.port = *overrides.port;

  const sigset_t signals = server::block_process_signals();

  RouterMetrics metrics;
  Fleet fleet(config, metrics);
  RouterApp app(config, metrics, fleet);

  server::ListenerSecurity security;
  security.plain = config.listen.plain;
  if (config.listen.tls_enabled()) {
    server::TlsFiles files{config.listen.tls_cert, config.listen.tls_key, config.listen.tls_client_ca, config.listen.tls_crl};
    security.tls = std::make_shared<server::TlsContext>(files);
    security.tls_hosts = config.listen.tls_hosts;
    security.tls_port = config.listen.tls_port;
  }
  std::shared_ptr<server::TlsContext> tls = security.tls;
  server::Listener listener(app, std::move(security));
  listener.bind();
  Prober prober(fleet);
  prober.start();
  listener.start();
  size_t urls = 0;
  for (const auto& b : config.backends) urls += b.urls.size();
  log::info("listening", {{"addresses", server::join_addresses(listener.endpoints(false))},
                          {"tls_addresses", server::join_addresses(listener.endpoints(true))},
                          {"backends", std::to_string(config.backends.size())},
                          {"upstreams", std::to_string(urls)}});

  const int sig = server::wait_for_stop_signal(signals, tls.get());
  log::info("shutting down: draining in-flight requests",
            {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}, {"inflight", std::to_string(app.inflight())}});
  app.begin_drain();
  listener.stop_accepting();
  if (const int left = server::wait_for_drain([&] { return app.inflight(); }, config.listen.drain_timeout_s); left > 0)
    log::warn("drain timeout: closing what is left", {{"inflight", std::to_string(left)}});
  prober.stop();
  listener.close_connections(2.0);
  log::info("stopped");
  if (listener.open_connections() > 0) {
    std::fflush(nullptr);
    std::_Exit(0);
  }
  return 0;
}

}  // namespace sanctum::router

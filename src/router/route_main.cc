#include "router/route_main.h"

#include <csignal>
#include <cstdio>
#include <pthread.h>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "router/fleet.h"
#include "router/prober.h"
#include "router/router_app.h"
#include "server/listener.h"

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

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

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
  auto joined = [](const std::vector<std::string>& list) {
    std::string out;
    for (const std::string& e : list) out += (out.empty() ? "" : ",") + e;
    return out.empty() ? std::string("-") : out;
  };
  size_t urls = 0;
  for (const auto& b : config.backends) urls += b.urls.size();
  log::info("listening", {{"addresses", joined(listener.endpoints(false))},
                          {"tls_addresses", joined(listener.endpoints(true))},
                          {"backends", std::to_string(config.backends.size())},
                          {"upstreams", std::to_string(urls)}});

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    if (!tls) {
      log::info("SIGHUP: no TLS listener, nothing to reload");
      continue;
    }
    try {
      tls->reload();
      log::info("SIGHUP: TLS certificates and CRL reloaded", {{"generation", std::to_string(tls->generation())}});
    } catch (const std::exception& e) {
      log::error("SIGHUP: reload failed, the previous certificates stay in use", {{"error", e.what()}});
    }
  }
  log::info("shutting down: draining in-flight requests",
            {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}, {"inflight", std::to_string(app.inflight())}});
  app.begin_drain();
  listener.stop_accepting();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                std::chrono::duration<double>(config.listen.drain_timeout_s));
  while (app.inflight() > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (app.inflight() > 0) log::warn("drain timeout: closing what is left", {{"inflight", std::to_string(app.inflight())}});
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

#pragma once
// The router's front: the same Listener as `sanctum serve` calls handle() on a connection thread.
// Routes: GET /health (open), GET /health/upstreams, GET /metrics, GET /v1/models[/{id}] (answered
// from the config), POST /v1/chat/completions and /v1/completions (proxied, see proxy.h). Every
// answer ends in one structured access-log line with the client identity and the upstream chosen.
#include <atomic>
#include <memory>
#include <string>

#include "router/client_auth.h"
#include "router/fleet.h"
#include "router/proxy.h"
#include "router/router_config.h"
#include "router/router_metrics.h"
#include "server/request_handler.h"
#include "server/route_table.h"

namespace sanctum::router {

class RouterApp : public server::RequestHandler {
 public:
  RouterApp(const RouterConfig& config, RouterMetrics& metrics, Fleet& fleet);

  void handle(server::Exchange& ex) override;
  bool draining() const override { return draining_.load(); }
  const server::ListenOptions& listen_options() const override { return listen_; }
  void observe_refused(const std::string& route, int status) override;

  void begin_drain() { draining_ = true; }
  int inflight() const { return inflight_.load(); }

 private:
  void health(server::Exchange& ex);
  void list_models(server::Exchange& ex);
  void get_model(server::Exchange& ex, const std::string& id);
  void upstream_status(server::Exchange& ex);
  void completions(server::Exchange& ex, const std::string& identity, ProxyOutcome& outcome);

  const RouterConfig& config_;
  RouterMetrics& metrics_;
  Fleet& fleet_;
  ClientAuth auth_;
  Proxy proxy_;
  // Handlers get the caller's identity (empty when anonymous) and the outcome the access log reports.
  server::RouteTable<const std::string&, ProxyOutcome&> routes_;
  server::ListenOptions listen_;
  std::atomic<bool> draining_{false};
  std::atomic<int> inflight_{0};
};

}  // namespace sanctum::router

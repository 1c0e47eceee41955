#include "router/router_app.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iterator>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "router/api_dialect.h"
#include "server/api_error.h"
#include "server/auth.h"

namespace sanctum::router {

using nlohmann::json;
using server::ApiError;

RouterApp::RouterApp(const RouterConfig& config, RouterMetrics& metrics, Fleet& fleet)
    : config_(config), metrics_(metrics), fleet_(fleet), auth_(config.listen), proxy_(config, metrics, fleet) {
  listen_.hosts = config.listen.hosts;
  listen_.port = config.listen.port;
  listen_.allow_unspecified = config.listen.allow_unspecified;
  listen_.body_limit = config.listen.body_limit;
  listen_.max_connections = config.listen.max_connections;
  listen_.keep_alive_timeout = config.listen.keep_alive_timeout_s;
  using Ex = server::Exchange;
  using Id = const std::string&;
  auto proxied = [this](Ex& ex, std::string_view, Id identity, ProxyOutcome& outcome) { completions(ex, identity, outcome); };
  routes_.add("GET", "/health", [this](Ex& ex, std::string_view, Id, ProxyOutcome&) { health(ex); })
      .add("GET", "/health/upstreams", [this](Ex& ex, std::string_view, Id, ProxyOutcome&) { upstream_status(ex); })
      .add("GET", "/metrics",
           [this](Ex& ex, std::string_view, Id, ProxyOutcome&) {
             ex.respond(200, "text/plain; version=0.0.4; charset=utf-8", metrics_.registry.render());
           })
      .add("GET", "/v1/models", [this](Ex& ex, std::string_view, Id, ProxyOutcome&) { list_models(ex); })
      .add("GET", "/v1/models/{model}", [this](Ex& ex, std::string_view id, Id, ProxyOutcome&) { get_model(ex, std::string(id)); })
      .add("POST", "/v1/chat/completions", proxied)
      .add("POST", "/v1/completions", proxied)
      .add("POST", "/v1/messages", proxied)
      .add("POST", "/v1/messages/count_tokens", proxied)
      .add("POST", "/v1/responses", proxied)
      .add("POST", "/tokenize", proxied)
      .add("POST", "/detokenize", proxied);
}

void RouterApp::observe_refused(const std::string& route, int status) {
  metrics_.http_requests.with({route, "-", std::to_string(status)}).inc();
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
std::string ms(double s) {
  if (s < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s * 1000.0);
  return buf;
}
}  // namespace

void RouterApp::handle(server::Exchange& ex) {
  const server::HttpRequest& req = ex.request();
  inflight_.fetch_add(1);
  metrics_.inflight.inc();
  ProxyOutcome outcome;
  std::string identity = "-";
  const ApiDialect dialect = dialect_of_path(req.path);  // errors answer in the shape the client's SDK reads
  try {
    const ClientAuth::Result who = auth_.authenticate(req);
    identity = who.identity.empty() ? "-" : who.identity;
    if (!who.allowed) {
      ex.route = "unauthorized";
      const ApiError error(401, "invalid_request_error",
                           who.missing ? "Missing bearer token: send the header Authorization: Bearer <token> (or X-Api-Key: <token>)"
                                       : "Incorrect bearer token provided",
                           "", "invalid_api_key");
      ex.respond(401, "application/json", dialect_error_body(dialect_of_path(req.path), error),
                 {{"WWW-Authenticate", who.missing ? "Bearer realm=\"sanctum\"" : "Bearer realm=\"sanctum\", error=\"invalid_token\""}});
      outcome.error = who.missing ? "missing bearer token" : "wrong bearer token";
    } else {
      routes_.dispatch(ex, who.identity, outcome);
    }
  } catch (const ApiError& e) {
    if (!ex.responded()) ex.respond_error(e, dialect_error_body(dialect, e));
    outcome.error = e.what();
  } catch (const std::exception& e) {
    log::error("internal error", {{"request_id", req.request_id}, {"route", ex.route}, {"error", e.what()}});
    const ApiError internal = server::internal_error(req.request_id);
    if (!ex.responded()) ex.respond_error(internal, dialect_error_body(dialect, internal));
    outcome.error = e.what();
  }
  if (!ex.responded()) {
    const ApiError internal = server::internal_error(req.request_id);
    ex.respond_error(internal, dialect_error_body(dialect, internal));
  }
  const double seconds = seconds_since(req.arrived);
  static const char* const kMethods[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"};
  const bool known = std::find(std::begin(kMethods), std::end(kMethods), req.method) != std::end(kMethods);
  metrics_.http_requests.with({ex.route, known ? req.method : "other", std::to_string(ex.status())}).inc();
  metrics_.http_duration.with({ex.route}).observe(seconds);
  metrics_.inflight.dec();
  inflight_.fetch_sub(1);
  const server::ClientParts parts = server::split_client(req.client);
  log::info("access", {{"request_id", req.request_id},
                       {"client", parts.address},
                       {"identity", identity},
                       {"method", req.method},
                       {"route", ex.route},
                       {"path", req.path},
                       {"status", std::to_string(ex.status())},
                       {"model", ex.model.empty() ? "-" : ex.model},
                       {"backend", outcome.backend},
                       {"upstream", outcome.upstream},
                       {"attempts", std::to_string(outcome.attempts)},
                       {"failovers", std::to_string(outcome.failovers)},
                       {"tokens", std::to_string(outcome.tokens)},
                       {"ttfb_ms", ms(outcome.ttfb_s)},
                       {"duration_ms", ms(seconds)},
                       {"error", outcome.error.empty() ? "-" : outcome.error}});
}

void RouterApp::health(server::Exchange& ex) {
  if (draining()) {
    ex.set_close_after();
    ex.respond_json(503, {{"status", "draining"}});
  } else {
    ex.respond_json(200, {{"status", "ok"}});
  }
}

void RouterApp::completions(server::Exchange& ex, const std::string& identity, ProxyOutcome& outcome) {
  if (draining()) throw server::unavailable("The router is shutting down", "draining");
  proxy_.handle(ex, identity, outcome);
}

namespace {
json model_card(const std::string& id, const std::string& owner, int64_t created) {
  return {{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", owner}};
}
const int64_t kStarted = static_cast<int64_t>(std::time(nullptr));
}  // namespace

void RouterApp::list_models(server::Exchange& ex) {
  json data = json::array();
  std::vector<std::string> seen;
  for (const auto& b : config_.backends)
    for (const auto& m : b.models)
      if (std::find(seen.begin(), seen.end(), m) == seen.end()) {
        seen.push_back(m);
        data.push_back(model_card(m, "sanctum-router:" + b.tier, kStarted));
      }
  for (const auto& [alias, target] : config_.aliases) {
    json card = model_card(alias, "sanctum-router:alias", kStarted);
    card["alias_of"] = target;
    data.push_back(card);
  }
  ex.respond_json(200, {{"object", "list"}, {"data", data}});
}

void RouterApp::get_model(server::Exchange& ex, const std::string& id) {
  const std::string served = config_.resolve(id);
  if (served.empty()) throw server::model_not_found(id);
  json card = model_card(id, "sanctum-router:" + config_.backends[config_.backends_for(served).front()].tier, kStarted);
  if (served != id) card["alias_of"] = served;
  ex.respond_json(200, card);
}

void RouterApp::upstream_status(server::Exchange& ex) {
  const auto now = std::chrono::steady_clock::now();
  json backends = json::array();
  for (const auto& b : fleet_.backends()) {
    json ups = json::array();
    bool any = false;
    for (const auto& u : b->upstreams) {
      any = any || u->healthy.load();
      json e = {{"url", u->label},
                {"role", u->index == 0 ? "primary" : "fallback"},
                {"healthy", u->healthy.load()},
                {"breaker", to_string(u->breaker.state())},
                {"degraded", u->degraded(now)},
                {"slow", u->slow.load()},
                {"ttft_ema_s", u->ttft.value() ? json(*u->ttft.value()) : json(nullptr)},
                {"total_ema_s", u->total.value() ? json(*u->total.value()) : json(nullptr)},
                {"idle_connections", u->pool.idle()}};
      if (const std::string why = u->degraded_reason(); !why.empty()) e["degraded_reason"] = why;
      ups.push_back(e);
    }
    backends.push_back(
        {{"name", b->config.name}, {"tier", b->config.tier}, {"models", b->config.models}, {"healthy", any}, {"upstreams", ups}});
  }
  ex.respond_json(200, {{"backends", backends}});
}

}  // namespace sanctum::router

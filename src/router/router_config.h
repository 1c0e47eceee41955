#pragma once
// `sanctum route` configuration, read from YAML (see docs/router.md for every key). Validation runs
// in full at start-up (and for `sanctum route --check`): unknown keys, wrong types, bad URLs,
// missing secrets and ambiguous routes are errors that name the offending key, e.g.
// "backends[1].fallback_urls[0]: ...". Nothing is half-applied.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "router/budget.h"
#include "router/circuit_breaker.h"
#include "router/quality.h"
#include "router/upstream_url.h"

namespace sanctum::router {

struct UpstreamTlsConfig {
  std::string ca;    // PEM CA bundle that signs the upstream's certificate; empty: system roots
  std::string cert;  // client certificate for mTLS upstreams (with key)
  std::string key;
  std::string server_name;  // name to verify instead of the URL's host (SNI and certificate check)
  bool verify = true;       // false only for tests against self-signed upstreams; logged loudly
};

struct Timeouts {
  double connect_s = 2;      // TCP connect + TLS handshake
  double first_byte_s = 60;  // request sent -> response head
  double idle_s = 30;        // longest silence between body reads (a stalled stream)
  double total_s = 600;      // whole exchange
};

struct CanaryConfig {
  bool enabled = false;
  double interval_s = 60;
  std::string prompt = "What is 2+2? Answer with only the number.";
  std::string expect = "4";  // must appear in the answer (case-insensitive)
  int max_tokens = 8;
  double timeout_s = 30;
};

struct QualityConfig {
  bool empty = true;
  bool utf8 = true;
  RepetitionParams repetition;
  double recovery_s = 60;  // a degraded upstream is skipped at least this long
};

struct LatencyConfig {
  double alpha = 0.2;
  double slow_factor = 3.0;  // slower than this many times the best equivalent: flagged slow
  double slow_ttft_s = 0;    // absolute limit on the TTFT EMA (0: none)
  double slow_total_s = 0;   // absolute limit on the total-time EMA (0: none)
};

struct BackendConfig {
  std::string name;
  std::string tier;
  std::vector<std::string> models;
  std::vector<UpstreamUrl> urls;  // the primary first, then fallback_urls in order
  std::string api_key_env;        // empty: no Authorization header upstream
  std::string api_key;            // resolved from the environment at load
  std::optional<UpstreamTlsConfig> tls;
  Timeouts timeouts;
  BudgetLimits budget;  // requests/tokens per window for the whole backend
  CircuitBreaker::Params breaker;
  QualityConfig quality;
  CanaryConfig canary;
  LatencyConfig latency;
  size_t max_idle_connections = 32;  // pooled keep-alive connections per upstream URL
};

struct ClientToken {
  std::string name;  // the client identity budgets and logs use
  std::string file;  // a private (0600) file holding the token ...
  std::string env;   // ... or an environment variable
};

struct ListenConfig {
  std::vector<std::string> hosts{"127.0.0.1"};
  int port = 8090;
  bool allow_unspecified = false;
  bool plain = true;
  size_t max_connections = 1024;
  double keep_alive_timeout_s = 60;
  size_t body_limit = 8u << 20;
  double drain_timeout_s = 30;
  // mTLS front (like serve --tls-*): all three files set, or none.
  std::string tls_cert, tls_key, tls_client_ca, tls_crl;
  std::vector<std::string> tls_hosts{"127.0.0.1"};
  int tls_port = 8443;
  std::vector<ClientToken> tokens;  // bearer tokens for the plain listener; empty: no check
  bool auth_loopback_bypass = false;
  bool tls_enabled() const { return !tls_cert.empty(); }
};

struct HealthConfig {
  double interval_s = 5;
  double timeout_s = 2;
};

struct RouterConfig {
  ListenConfig listen;
  HealthConfig health;
  std::map<std::string, std::string> aliases;          // requested name -> served model name
  std::string default_model;                           // used when a request names no model; empty: 400
  BudgetLimits client_budget;                          // each client identity
  std::map<std::string, BudgetLimits> client_budgets;  // per-identity overrides
  std::vector<BackendConfig> backends;

  // The backends serving `model` (after alias resolution), in config order.
  std::vector<size_t> backends_for(const std::string& model) const;
  // The served model a requested name means: an alias target, the name itself, or "" (unknown).
  std::string resolve(const std::string& requested) const;
};

// Parses and validates; throws sanctum::Error naming the file and key. `environment` lookups go
// through getenv (API keys and token variables must be set when the config is loaded).
RouterConfig load_router_config(const std::string& path);
RouterConfig parse_router_config(const std::string& yaml_text, const std::string& source = "<config>");

}  // namespace sanctum::router

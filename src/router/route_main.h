#pragma once
// `sanctum route` start-up and shutdown: validate the config (all of it, before any socket), build
// the fleet (TLS contexts, pools, breakers), bind the front with the serve listener's policy, start
// the probers, serve. SIGHUP reloads the front's mTLS certificates; SIGTERM/SIGINT stop accepting,
// let in-flight requests finish within listen.drain_timeout_s, then exit 0.
#include <optional>
#include <string>
#include <vector>

#include "router/router_config.h"

namespace sanctum::router {

struct RouteOverrides {
  std::optional<std::vector<std::string>> hosts;  // --host (repeatable)
  std::optional<int> port;                        // --port
};

// Blocks until shutdown; returns the exit code. Throws sanctum::Error on a start-up failure.
int run_router(RouterConfig config, const RouteOverrides& overrides);

// A one-paragraph summary of a valid config (what `--check` prints).
std::string describe(const RouterConfig& config);

}  // namespace sanctum::router

// sanctum route: the smart router in front of several sanctum (or other OpenAI-compatible) servers.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/log_flags.h"
#include "router/route_main.h"
#include "router/router_config.h"

namespace sanctum::cli {
namespace {

const char* kUsage =
    "usage: sanctum route --config FILE [--host ADDR ...] [--port N] [--log-format text|json]\n"
    "                     [--log-level debug|info|warn|error]\n"
    "       sanctum route --check FILE\n"
    "Routes OpenAI requests (POST /v1/chat/completions, /v1/completions; GET /v1/models) to backends\n"
    "by model or alias: each backend's primary URL, then its fallback_urls, on connect errors,\n"
    "timeouts, 5xx and responses that fail a quality check (empty, a repetition loop, invalid UTF-8);\n"
    "4xx go back to the client as they are; a stream is never switched once the client has bytes.\n"
    "Per upstream URL: a circuit breaker, latency EMAs (TTFT and total) that prefer the faster of\n"
    "equivalent backends and flag slow ones, periodic health probes and an optional canary question.\n"
    "Per client identity (bearer token name, or mTLS CN) and per backend: request and token budgets\n"
    "(429 with Retry-After). GET /health, /health/upstreams, /metrics (sanctum_router_*).\n"
    "The listener takes serve's options from the config's listen: section (bind policy, mTLS, bearer\n"
    "tokens); --host/--port override it. --check validates the config (every key, files, environment\n"
    "variables) and prints a summary without binding anything. See docs/router.md.\n";

int run_route(int argc, char** argv) {
  Args args(argc, argv, {"config", "check", "host", "port", "log-format", "log-level"}, {"help"});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  check(args.positionals().empty(), ErrorKind::invalid_argument,
        "unexpected argument '" + (args.positionals().empty() ? "" : args.positionals()[0]) + "' (use --config FILE or --check FILE)");
  if (args.has("check")) {
    check(!args.has("config"), ErrorKind::invalid_argument, "give --check FILE or --config FILE, not both");
    const std::string path = *args.get("check");
    const router::RouterConfig config = router::load_router_config(path);
    std::printf("%s: OK\n%s", path.c_str(), router::describe(config).c_str());
    return 0;
  }
  check(args.has("config"), ErrorKind::invalid_argument, "--config FILE is required (or --check FILE); see sanctum route --help");
  apply_log_flags(args);

  router::RouteOverrides overrides;
  if (args.has("host")) overrides.hosts = args.get_all("host");
  if (args.has("port")) {
    const long long port = args.get_int("port", 0);
    check(port >= 0 && port <= 65535, ErrorKind::invalid_argument, "--port must be in 0..65535");
    overrides.port = static_cast<int>(port);
  }
  return router::run_router(router::load_router_config(*args.get("config")), overrides);
}

SubcommandRegistration reg("route", "smart router in front of several servers (failover, breaker, budgets, latency EMA)", run_route);

}  // namespace
}  // namespace sanctum::cli

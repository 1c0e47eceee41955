#pragma once
// What the Listener serves: anything that answers requests on a connection thread. `sanctum serve`
// (App) and `sanctum route` (router::RouterApp) both plug in here, so they share one bind policy,
// TLS/mTLS bridge, bearer check, keep-alive and drain behaviour.
#include <cstddef>
#include <string>
#include <vector>

#include "server/exchange.h"

namespace sanctum::server {

// The listener's own settings (ServerOptions extends them with the model server's).
struct ListenOptions {
  std::vector<std::string> hosts{"127.0.0.1"};
  int port = 8080;
  bool allow_unspecified = false;
  size_t body_limit = 8u << 20;
  size_t max_connections = 1024;
  double keep_alive_timeout = 60.0;
};

class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // Answers one request; never throws.
  virtual void handle(Exchange& ex) = 0;
  // While draining, idle keep-alive connections close and no new request starts on them.
  virtual bool draining() const = 0;
  virtual const ListenOptions& listen_options() const = 0;
  // A request the listener refused before handle() (malformed, too large, 401): count it.
  virtual void observe_refused(const std::string& route, int status) = 0;
};

}  // namespace sanctum::server

#pragma once
// Who is calling the router. On the mTLS listener: the client certificate's CN. On the plain
// listener with listen.auth: the name of the bearer token presented (each token is compared in
// constant time, see server/auth.h). Otherwise: the peer address ("ip:ADDRESS"), so budgets still
// apply per caller. GET /health stays open (liveness probes carry no credentials).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "router/router_config.h"
#include "server/auth.h"
#include "server/exchange.h"

namespace sanctum::router {

class ClientAuth {
 public:
  // Reads every token (files must be private, 0600; env variables must be set). Throws sanctum::Error.
  explicit ClientAuth(const ListenConfig& listen);

  struct Result {
    bool allowed = false;
    bool missing = false;  // no (bearer) credentials at all, as opposed to wrong ones
    std::string identity;  // budget key and access-log identity
  };
  Result authenticate(const server::HttpRequest& req) const;
  bool enabled() const { return !tokens_.empty(); }

 private:
  std::vector<std::pair<std::string, server::BearerAuth>> tokens_;  // (identity, token)
  bool loopback_bypass_ = false;
};

}  // namespace sanctum::router

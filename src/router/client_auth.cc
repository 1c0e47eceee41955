#include "router/client_auth.h"

#include <cstdlib>
#include <optional>
#include <string_view>

#include "base/error.h"

namespace sanctum::router {

ClientAuth::ClientAuth(const ListenConfig& listen) : loopback_bypass_(listen.auth_loopback_bypass) {
  for (const ClientToken& t : listen.tokens) {
    if (!t.file.empty()) {
      tokens_.emplace_back(t.name, server::BearerAuth::from_file(t.file, false));
    } else {
      const char* value = std::getenv(t.env.c_str());
      check(value && *value, ErrorKind::invalid_argument, "listen.auth.tokens: environment variable " + t.env + " is not set");
      tokens_.emplace_back(t.name, server::BearerAuth(value, false));
    }
  }
}

ClientAuth::Result ClientAuth::authenticate(const server::HttpRequest& req) const {
  const server::ClientParts who = server::split_client(req.client);
  Result r;
  if (req.tls) {
    r.allowed = true;  // the handshake already required a valid client certificate
    r.identity = who.identity.empty() ? "cn:-" : who.identity;
    return r;
  }
  std::string ip = who.address;
  if (const size_t colon = ip.rfind(':'); colon != std::string::npos) ip.resize(colon);
  if (tokens_.empty() || req.path == "/health" || (loopback_bypass_ && req.loopback)) {
    r.allowed = true;
    r.identity = "ip:" + ip;
    // A loopback client that does present a valid token is still known by its name.
    if (tokens_.empty() || req.path == "/health") return r;
  }
  // Bearer first; Anthropic clients send the same token as X-Api-Key.
  std::optional<std::string_view> presented = server::bearer_token(req.authorization);
  if (!presented && !req.x_api_key.empty()) presented = std::string_view(req.x_api_key);
  if (!presented) {
    r.missing = !r.allowed;
    return r;
  }
  // Compare against every token (no early exit), so timing does not tell which one matched.
  const std::string* match = nullptr;
  for (const auto& [name, token] : tokens_)
    if (token.token_matches(*presented) && !match) match = &name;
  if (match) {
    r.allowed = true;
    r.identity = *match;
  }
  return r;
}

}  // namespace sanctum::router

#pragma once
// Who a request comes from, and whether the plain listener lets it in.
//
// Identity: a connection accepted on the mTLS listener carries its client certificate's CN. It rides
// in HttpRequest::client as "NAME@ADDRESS:PORT" (an address never contains '@'), so every handler
// and the access log see it without a second channel; split_client() takes it apart again.
//
// Bearer tokens (--auth-token-file) guard the plain listener. The token file must be private (0600,
// like a key); the comparison hashes both sides with SHA-256 and compares the digests with
// CRYPTO_memcmp, so neither the content nor the length of the token leaks through timing. Requests
// from loopback peers skip the check only with --auth-loopback-bypass. GET /health stays open: it
// reveals nothing but "ok"/"draining", and liveness probes (systemd, load balancers) carry no
// credentials. /health/deep runs an inference step and /metrics describes the traffic, so both need
// the token. GET / and GET /ui/* (the chat page, server/ui/ui_routes.h) stay open too: the page
// holds no secret, asks for the token itself and sends it with every API call.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sanctum::server {

struct ClientParts {
  std::string identity;  // the certificate CN; empty for a connection without one
  std::string address;   // "ADDRESS:PORT"
};

// "NAME@ADDRESS:PORT", or just the address when there is no identity. Control characters and '@' in
// the name become '?', so a crafted CN cannot forge a log field or a second identity.
std::string client_with_identity(std::string_view identity, std::string_view address);
ClientParts split_client(std::string_view client);

class BearerAuth {
 public:
  // Reads the token from a private file (refused when group or others can read it), dropping one
  // trailing newline and surrounding whitespace. Throws sanctum::Error naming the path.
  static BearerAuth from_file(const std::string& path, bool loopback_bypass);
  BearerAuth(std::string_view token, bool loopback_bypass);

  enum class Decision { allow_open_route, allow_loopback, allow_token, deny_missing, deny_wrong };
  // authorization: the Authorization header's value ("" when absent). x_api_key: the X-Api-Key
  // header's value, the same token as Anthropic's clients send it; used when there is no bearer token.
  Decision decide(std::string_view method, std::string_view path, std::string_view authorization, bool peer_is_loopback,
                  std::string_view x_api_key = {}) const;
  static bool allowed(Decision d) { return d == Decision::allow_open_route || d == Decision::allow_loopback || d == Decision::allow_token; }

  // Constant-time check of a presented token.
  bool token_matches(std::string_view presented) const;

 private:
  std::array<uint8_t, 32> token_digest_{};
  bool loopback_bypass_ = false;
};

// "Bearer <token>" (scheme case-insensitive, spaces around the token ignored); nullopt for any
// other scheme or an empty token.
std::optional<std::string_view> bearer_token(std::string_view authorization);

}  // namespace sanctum::server

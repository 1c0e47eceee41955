#pragma once
// The client side of TLS to an upstream: one SSL_CTX per backend, TLS 1.2+, the upstream's
// certificate verified against `ca` (or the system roots) and its name (or IP) checked; with
// cert/key the router presents a client certificate, for upstreams that require mTLS (a
// `sanctum serve --tls-*` seat).
#include <memory>
#include <string>

#include <openssl/ssl.h>

#include "router/router_config.h"

namespace sanctum::router {

class UpstreamTls {
 public:
  // Throws sanctum::Error naming `what` (the config key) and the file that is wrong.
  UpstreamTls(const UpstreamTlsConfig& config, const std::string& what);
  ~UpstreamTls();
  UpstreamTls(const UpstreamTls&) = delete;
  UpstreamTls& operator=(const UpstreamTls&) = delete;

  SSL_CTX* ctx() const { return ctx_; }
  bool verify() const { return verify_; }
  // The name to check on the certificate (and send as SNI): the configured server_name or `host`.
  std::string name_for(const std::string& host) const { return server_name_.empty() ? host : server_name_; }

 private:
  SSL_CTX* ctx_ = nullptr;
  bool verify_ = true;
  std::string server_name_;
};

// The OpenSSL error queue as one line (and cleared).
std::string openssl_errors();

}  // namespace sanctum::router

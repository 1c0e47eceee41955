#include "router/upstream_tls.h"

#include <openssl/err.h>

#include "base/error.h"

namespace sanctum::router {

std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown TLS error" : out;
}

UpstreamTls::UpstreamTls(const UpstreamTlsConfig& config, const std::string& what)
    : verify_(config.verify), server_name_(config.server_name) {
  ctx_ = SSL_CTX_new(TLS_client_method());
  check(ctx_ != nullptr, ErrorKind::internal, what + ": cannot create a TLS context: " + openssl_errors());
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (!config.ca.empty()) {
    if (SSL_CTX_load_verify_locations(ctx_, config.ca.c_str(), nullptr) != 1)
      fail(ErrorKind::invalid_argument, what + ".ca: cannot load CA certificates from '" + config.ca + "': " + openssl_errors());
  } else if (SSL_CTX_set_default_verify_paths(ctx_) != 1) {
    fail(ErrorKind::invalid_argument, what + ": cannot load the system CA certificates: " + openssl_errors());
  }
  if (!config.cert.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx_, config.cert.c_str()) != 1)
      fail(ErrorKind::invalid_argument, what + ".cert: cannot load '" + config.cert + "': " + openssl_errors());
    if (SSL_CTX_use_PrivateKey_file(ctx_, config.key.c_str(), SSL_FILETYPE_PEM) != 1)
      fail(ErrorKind::invalid_argument, what + ".key: cannot load '" + config.key + "': " + openssl_errors());
    if (SSL_CTX_check_private_key(ctx_) != 1) fail(ErrorKind::invalid_argument, what + ": the key does not match the client certificate");
  }
  SSL_CTX_set_verify(ctx_, verify_ ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
}

UpstreamTls::~UpstreamTls() { SSL_CTX_free(ctx_); }

}  // namespace sanctum::router

#pragma once
// One accepted mTLS connection. The handshake runs first (the client certificate is required and
// verified against the client CA and CRL of the context in force); then a pump carries plaintext
// between the TLS socket and one end of a socketpair, and the other end is served by exactly the
// code that serves a plain connection (parser, deadlines, keep-alive, SSE, disconnect detection).
// When the certificates are reloaded (SIGHUP), an open connection re-verifies its client's
// certificate against the new CA and CRL and is closed if it no longer passes, so a revoked client
// loses its keep-alive connections too.
#include <atomic>
#include <memory>
#include <string>

#include <openssl/ssl.h>

#include "server/tls_context.h"

namespace sanctum::server {

class TlsConnection {
 public:
  // Takes ownership of `fd`. Returns nullptr, after logging why, when the handshake fails, does not
  // finish within `timeout_s`, or `stop` turns true meanwhile.
  static std::unique_ptr<TlsConnection> accept(std::shared_ptr<const TlsContext> tls, int fd, const std::string& peer,
                                               const std::atomic<bool>& stop, double timeout_s);
  ~TlsConnection();
  TlsConnection(const TlsConnection&) = delete;
  TlsConnection& operator=(const TlsConnection&) = delete;

  // The client certificate's subject CN (UTF-8), or "" when it has none.
  const std::string& common_name() const { return cn_; }
  const std::string& protocol() const { return protocol_; }

  // Creates the socketpair and returns the plaintext end, which the caller serves and closes.
  // Throws sanctum::Error when the socketpair cannot be made.
  int open_plaintext();
  // Runs until both directions are finished or either side fails; then closes the TLS side.
  void pump();

 private:
  TlsConnection(std::shared_ptr<const TlsContext> tls, std::shared_ptr<boost::asio::ssl::context> ctx, int fd, std::string peer);
  bool handshake(const std::atomic<bool>& stop, double timeout_s);
  // After a reload: does the peer's certificate still verify against the current context?
  bool peer_still_trusted();

  std::shared_ptr<const TlsContext> tls_;
  std::shared_ptr<boost::asio::ssl::context> ctx_;  // keeps the SSL_CTX of this connection alive
  SSL* ssl_ = nullptr;
  int fd_ = -1;        // the TCP socket
  int plain_fd_ = -1;  // our end of the socketpair
  std::string peer_;
  std::string cn_;
  std::string protocol_;
  uint64_t generation_ = 0;
};

}  // namespace sanctum::server

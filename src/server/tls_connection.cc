#include "server/tls_connection.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "base/error.h"
#include "base/log.h"

namespace sanctum::server {

namespace {

constexpr int kSliceMs = 100;         // how often a waiting handshake looks at the stop flag
constexpr int kRecheckMs = 1000;      // how often an idle pump looks for a certificate reload
constexpr size_t kChunk = 16 * 1024;  // one TLS record's worth of plaintext

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

std::string drain_openssl_errors() {
  std::string out;
  unsigned long code;
  while ((code = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    out = buf;  // the last one is the most specific
  }
  return out;
}

std::string subject_cn(X509* cert) {
  if (!cert) return "";
  X509_NAME* name = X509_get_subject_name(cert);
  const int at = name ? X509_NAME_get_index_by_NID(name, NID_commonName, -1) : -1;
  if (at < 0) return "";
  unsigned char* utf8 = nullptr;
  const int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, at)));
  if (n < 0) return "";
  std::string cn(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  return cn;
}

}  // namespace

TlsConnection::TlsConnection(std::shared_ptr<const TlsContext> tls, std::shared_ptr<boost::asio::ssl::context> ctx, int fd,
                             std::string peer)
    : tls_(std::move(tls)), ctx_(std::move(ctx)), fd_(fd), peer_(std::move(peer)) {}

TlsConnection::~TlsConnection() {
  if (ssl_) SSL_free(ssl_);
  if (plain_fd_ >= 0) ::close(plain_fd_);
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<TlsConnection> TlsConnection::accept(std::shared_ptr<const TlsContext> tls, int fd, const std::string& peer,
                                                     const std::atomic<bool>& stop, double timeout_s) {
  const uint64_t generation = tls->generation();
  auto ctx = tls->current();
  std::unique_ptr<TlsConnection> conn(new TlsConnection(std::move(tls), std::move(ctx), fd, peer));
  conn->generation_ = generation;
  if (!conn->handshake(stop, timeout_s)) return nullptr;
  return conn;
}

bool TlsConnection::handshake(const std::atomic<bool>& stop, double timeout_s) {
  set_nonblocking(fd_);
  ssl_ = SSL_new(ctx_->native_handle());
  if (!ssl_ || SSL_set_fd(ssl_, fd_) != 1) {
    log::error("TLS: cannot create a session", {{"client", peer_}, {"error", drain_openssl_errors()}});
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
  ERR_clear_error();
  for (;;) {
    const int r = SSL_accept(ssl_);
    if (r == 1) break;
    const int err = SSL_get_error(ssl_, r);
    short events = 0;
    if (err == SSL_ERROR_WANT_READ) events = POLLIN;
    else if (err == SSL_ERROR_WANT_WRITE) events = POLLOUT;
    if (events == 0) {
      const long verify = SSL_get_verify_result(ssl_);
      std::string reason = verify != X509_V_OK ? X509_verify_cert_error_string(verify) : drain_openssl_errors();
      if (reason.empty()) reason = err == SSL_ERROR_SYSCALL ? "connection closed during the handshake" : "handshake failed";
      ERR_clear_error();
      log::info("TLS handshake rejected", {{"client", peer_}, {"reason", reason}});
      return false;
    }
    for (;;) {
      if (stop.load()) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) {
        log::info("TLS handshake rejected", {{"client", peer_}, {"reason", "timed out"}});
        return false;
      }
      pollfd p{fd_, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, kSliceMs)));
      if (n > 0 || (n < 0 && errno != EINTR)) break;
    }
  }
  X509* cert = SSL_get0_peer_certificate(ssl_);
  cn_ = subject_cn(cert);
  protocol_ = SSL_get_version(ssl_);
  return true;
}

int TlsConnection::open_plaintext() {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    fail(ErrorKind::io, std::string("socketpair: ") + std::strerror(errno));
  plain_fd_ = pair[0];
  set_nonblocking(plain_fd_);
  return pair[1];
}

bool TlsConnection::peer_still_trusted() {
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (!cert) return false;
  auto ctx = tls_->current();
  X509_STORE_CTX* store_ctx = X509_STORE_CTX_new();
  if (!store_ctx) return false;
  bool ok = X509_STORE_CTX_init(store_ctx, SSL_CTX_get_cert_store(ctx->native_handle()), cert, SSL_get_peer_cert_chain(ssl_)) == 1 &&
            X509_STORE_CTX_set_purpose(store_ctx, X509_PURPOSE_SSL_CLIENT) == 1 && X509_verify_cert(store_ctx) == 1;
  if (!ok) {
    const int e = X509_STORE_CTX_get_error(store_ctx);
    log::warn("TLS: closing a connection whose client certificate no longer verifies",
              {{"client", peer_}, {"identity", cn_}, {"reason", X509_verify_cert_error_string(e)}});
  }
  X509_STORE_CTX_free(store_ctx);
  ERR_clear_error();
  return ok;
}

void TlsConnection::pump() {
  std::string to_plain, to_tls;  // bytes waiting for the other side
  bool tls_done = false;         // the client closed (or the TLS session failed)
  bool plain_done = false;       // the server side stopped sending
  bool close_notify_sent = false;
  char buf[kChunk];
  for (;;) {
    short tls_events = 0, plain_events = 0;
    bool progress = true;
    while (progress) {
      progress = false;
      tls_events = plain_events = 0;
      // Client -> server. Only read when the previous chunk went through: TLS backpressure follows the server.
      if (!tls_done && to_plain.empty()) {
        const int n = SSL_read(ssl_, buf, static_cast<int>(sizeof buf));
        if (n > 0) {
          to_plain.assign(buf, static_cast<size_t>(n));
          progress = true;
        } else {
          const int err = SSL_get_error(ssl_, n);
          if (err == SSL_ERROR_WANT_READ) tls_events |= POLLIN;
          else if (err == SSL_ERROR_WANT_WRITE) tls_events |= POLLOUT;
          else {
            tls_done = true;  // close_notify, EOF or a fatal alert: the server sees end of stream
            ERR_clear_error();
            ::shutdown(plain_fd_, SHUT_WR);
            progress = true;
          }
        }
      }
      if (!to_plain.empty()) {
        const ssize_t n = ::send(plain_fd_, to_plain.data(), to_plain.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          to_plain.erase(0, static_cast<size_t>(n));
          progress = true;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          plain_events |= POLLOUT;
        } else if (!(n < 0 && errno == EINTR)) {
          return;  // the server side closed: nothing left to deliver
        }
      }
      // Server -> client.
      if (!plain_done && to_tls.empty()) {
        const ssize_t n = ::recv(plain_fd_, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
          to_tls.assign(buf, static_cast<size_t>(n));
          progress = true;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          plain_events |= POLLIN;
        } else if (!(n < 0 && errno == EINTR)) {
          plain_done = true;
          progress = true;
        }
      }
      if (!to_tls.empty()) {
        const int n = SSL_write(ssl_, to_tls.data(), static_cast<int>(to_tls.size()));
        if (n > 0) {
          to_tls.erase(0, static_cast<size_t>(n));
          progress = true;
        } else {
          const int err = SSL_get_error(ssl_, n);
          if (err == SSL_ERROR_WANT_WRITE) tls_events |= POLLOUT;
          else if (err == SSL_ERROR_WANT_READ) tls_events |= POLLIN;
          else return;  // the client is gone
        }
      }
      if (plain_done && to_tls.empty() && !close_notify_sent) {
        SSL_shutdown(ssl_);  // queues close_notify; the client's reply is not awaited
        ERR_clear_error();
        close_notify_sent = true;
        progress = true;
      }
      if (plain_done && tls_done && to_tls.empty()) return;
    }
    if (generation_ != tls_->generation()) {
      generation_ = tls_->generation();
      if (!peer_still_trusted()) return;
    }
    // Once the server side has said everything, keep forwarding what the client still sends (an
    // early error answer drains the request before closing) until the server side hangs up, which
    // poll reports as POLLHUP whatever events were asked for.
    const bool watch_hangup = plain_done && to_tls.empty();
    pollfd p[2] = {{tls_events ? fd_ : -1, tls_events, 0}, {(plain_events || watch_hangup) ? plain_fd_ : -1, plain_events, 0}};
    const int r = ::poll(p, 2, kRecheckMs);
    if (r < 0 && errno != EINTR) return;
    if (r > 0 && (p[1].revents & (POLLHUP | POLLERR)) && watch_hangup) return;
  }
}

}  // namespace sanctum::server

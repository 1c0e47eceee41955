#include "router/upstream_connection.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

namespace sanctum::router {

namespace net = boost::asio;

namespace {
constexpr int kSliceMs = 50;  // how often a blocked wait looks at the cancel flag

int ms_until(UpstreamConnection::Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - UpstreamConnection::Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left + 1, 0, kSliceMs));
}

bool is_ip_literal(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}
}  // namespace

UpstreamConnection::~UpstreamConnection() {
  if (ssl_) {
    SSL_set_quiet_shutdown(ssl_, 1);
    SSL_free(ssl_);
  }
  if (fd_ >= 0) ::close(fd_);
}

bool UpstreamConnection::wait(short events, boost::system::error_code& ec) {
  for (;;) {
    if (cancelled_ && cancelled_()) {
      ec = net::error::operation_aborted;
      return false;
    }
    if (Clock::now() >= deadline_) {
      ec = net::error::timed_out;
      return false;
    }
    pollfd p{fd_, events, 0};
    const int timeout = deadline_ == Clock::time_point::max() ? kSliceMs : ms_until(deadline_);
    const int r = ::poll(&p, 1, timeout);
    if (r < 0) {
      if (errno == EINTR) continue;
      ec = boost::system::error_code(errno, boost::system::system_category());
      return false;
    }
    if (r > 0) return true;  // ready, or an error the next read/write reports
  }
}

size_t UpstreamConnection::read_into(void* data, size_t size, boost::system::error_code& ec) {
  for (;;) {
    if (ssl_) {
      ERR_clear_error();
      const int n = SSL_read(ssl_, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
      if (n > 0) {
        ec = {};
        return static_cast<size_t>(n);
      }
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_WANT_READ) {
        if (!wait(POLLIN, ec)) return 0;
        continue;
      }
      if (err == SSL_ERROR_WANT_WRITE) {
        if (!wait(POLLOUT, ec)) return 0;
        continue;
      }
      if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && errno == 0)) ec = net::error::eof;
      else ec = net::error::connection_reset;
      return 0;
    }
    const ssize_t n = ::recv(fd_, data, size, MSG_DONTWAIT);
    if (n > 0) {
      ec = {};
      return static_cast<size_t>(n);
    }
    if (n == 0) {
      ec = net::error::eof;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait(POLLIN, ec)) return 0;
      continue;
    }
    ec = boost::system::error_code(errno, boost::system::system_category());
    return 0;
  }
}

bool UpstreamConnection::write_all(const char* data, size_t size, boost::system::error_code& ec) {
  size_t off = 0;
  while (off < size) {
    if (ssl_) {
      ERR_clear_error();
      const int n = SSL_write(ssl_, data + off, static_cast<int>(std::min<size_t>(size - off, 1 << 30)));
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_WANT_WRITE) {
        if (!wait(POLLOUT, ec)) return false;
        continue;
      }
      if (err == SSL_ERROR_WANT_READ) {
        if (!wait(POLLIN, ec)) return false;
        continue;
      }
      ec = net::error::connection_reset;
      return false;
    }
    const ssize_t n = ::send(fd_, data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait(POLLOUT, ec)) return false;
      continue;
    }
    ec = n < 0 ? boost::system::error_code(errno, boost::system::system_category()) : net::error::connection_reset;
    return false;
  }
  ec = {};
  return true;
}

bool UpstreamConnection::idle_usable() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  const int r = ::poll(&p, 1, 0);
  if (r < 0) return false;
  // Any readable byte on an idle connection is either EOF or junk: not reusable.
  return r == 0 && !(ssl_ && SSL_pending(ssl_) > 0);
}

std::unique_ptr<UpstreamConnection> UpstreamConnection::open(const UpstreamUrl& url, const UpstreamTls* tls, Clock::time_point deadline,
                                                             const std::function<bool()>& cancelled, std::string& error, bool& timed_out) {
  timed_out = false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const std::string port = std::to_string(url.port);
  const int gai = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &list);
  if (gai != 0) {
    error = "cannot resolve " + url.host + ": " + gai_strerror(gai);
    return nullptr;
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(list, freeaddrinfo);
  error = "no address for " + url.host;
  for (addrinfo* ai = list; ai; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    std::unique_ptr<UpstreamConnection> conn(new UpstreamConnection(fd));
    conn->deadline_ = deadline;
    conn->cancelled_ = cancelled;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    boost::system::error_code ec;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        error = "connect to " + url.host + ":" + port + ": " + std::strerror(errno);
        continue;
      }
      if (!conn->wait(POLLOUT, ec)) {
        timed_out = ec == net::error::timed_out;
        error = timed_out ? "connect to " + url.host + ":" + port + " timed out" : "connect cancelled";
        if (ec == net::error::operation_aborted) return nullptr;
        continue;
      }
      int so_error = 0;
      socklen_t len = sizeof so_error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
      if (so_error != 0) {
        error = "connect to " + url.host + ":" + port + ": " + std::strerror(so_error);
        continue;
      }
    }
    if (url.tls) {
      if (!tls) {
        error = "https upstream without a TLS context";
        return nullptr;
      }
      conn->ssl_ = SSL_new(tls->ctx());
      SSL_set_fd(conn->ssl_, fd);
      const std::string name = tls->name_for(url.host);
      if (!is_ip_literal(name)) SSL_set_tlsext_host_name(conn->ssl_, name.c_str());
      if (tls->verify()) {
        if (is_ip_literal(name)) X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(conn->ssl_), name.c_str());
        else SSL_set1_host(conn->ssl_, name.c_str());
      }
      for (;;) {
        ERR_clear_error();
        const int r = SSL_connect(conn->ssl_);
        if (r == 1) break;
        const int err = SSL_get_error(conn->ssl_, r);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
          if (!conn->wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, ec)) {
            timed_out = ec == net::error::timed_out;
            error = timed_out ? "TLS handshake with " + url.host + ":" + port + " timed out" : "TLS handshake cancelled";
            return nullptr;
          }
          continue;
        }
        const long verify = SSL_get_verify_result(conn->ssl_);
        error = "TLS handshake with " + url.host + ":" + port + " failed: " +
                (verify != X509_V_OK ? std::string("certificate: ") + X509_verify_cert_error_string(verify) : openssl_errors());
        return nullptr;
      }
    }
    conn->deadline_ = Clock::time_point::max();
    conn->cancelled_ = nullptr;
    error.clear();
    return conn;
  }
  return nullptr;
}

}  // namespace sanctum::router

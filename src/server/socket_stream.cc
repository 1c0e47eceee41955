#include "server/socket_stream.h"

#include <algorithm>
#include <cerrno>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace sanctum::server {

namespace {
constexpr int kSliceMs = 100;
constexpr int kWriteTimeoutMs = 30000;  // a client that stops reading for this long is dropped
}  // namespace

SocketStream::~SocketStream() {
  if (fd_ >= 0) ::close(fd_);
}

size_t SocketStream::read_into(void* data, size_t size, boost::system::error_code& ec) {
  namespace error = boost::asio::error;
  for (;;) {
    if (give_up_ && give_up_()) {
      ec = error::eof;
      return 0;
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline_) {
      ec = error::timed_out;
      return 0;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now).count();
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left + 1, kSliceMs)));
    if (r < 0) {
      if (errno == EINTR) continue;
      ec = boost::system::error_code(errno, boost::system::system_category());
      return 0;
    }
    if (r == 0) continue;
    ssize_t n = ::recv(fd_, data, size, 0);
    if (n > 0) {
      bytes_read_ += static_cast<size_t>(n);
      ec = {};
      return static_cast<size_t>(n);
    }
    if (n == 0) {
      ec = error::eof;
      return 0;
    }
    if (errno == EINTR || errno == EAGAIN) continue;
    ec = boost::system::error_code(errno, boost::system::system_category());
    return 0;
  }
}

bool SocketStream::write_all(std::string_view data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      int r = ::poll(&p, 1, kWriteTimeoutMs);
      if (r <= 0 || (p.revents & (POLLERR | POLLHUP))) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool SocketStream::peer_closed() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    // Readable: pipelined bytes, or an orderly close (recv would return 0).
    char c;
    ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  return false;
}

void SocketStream::linger_close() {
  ::shutdown(fd_, SHUT_WR);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  char sink[16384];
  size_t total = 0;
  while (std::chrono::steady_clock::now() < until && total < (64u << 20)) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) < 0 && errno != EINTR) return;
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t n = ::recv(fd_, sink, sizeof sink, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;
    if (n > 0) total += static_cast<size_t>(n);
  }
}

void SocketStream::shutdown() { ::shutdown(fd_, SHUT_RDWR); }

}  // namespace sanctum::server

#pragma once
// A connected TCP socket for one connection thread: Beast's synchronous parser reads through
// read_some (which waits in short poll slices so idle keep-alive connections notice a deadline or a
// shutdown), and responses go out with write_all. Closing the fd is this object's job.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>

#include "server/sync_read_some.h"

namespace sanctum::server {

// A Beast SyncReadStream (read_some: SyncReadSome).
class SocketStream : public SyncReadSome<SocketStream> {
 public:
  explicit SocketStream(int fd) : fd_(fd) {}
  ~SocketStream();
  SocketStream(const SocketStream&) = delete;
  SocketStream& operator=(const SocketStream&) = delete;

  int fd() const { return fd_; }

  // Reads stop with net::error::timed_out past the deadline, and with eof when `give_up` says so
  // (checked every slice; used to drop idle connections while draining).
  void set_deadline(std::chrono::steady_clock::time_point deadline) { deadline_ = deadline; }
  void set_give_up(std::function<bool()> give_up) { give_up_ = std::move(give_up); }
  size_t bytes_read() const { return bytes_read_; }

  // Writes everything or returns false (the peer is gone, or the write stalled past the timeout).
  bool write_all(std::string_view data);
  // True once the peer has closed or reset its side (checked without blocking).
  bool peer_closed() const;
  // After an early error answer: stop sending, then read and discard what the client is still
  // sending (briefly), so closing does not reset the connection before it reads the answer.
  void linger_close();
  // Wakes any blocked reader; the connection thread then closes.
  void shutdown();

 private:
  friend class SyncReadSome<SocketStream>;
  size_t read_into(void* data, size_t size, boost::system::error_code& ec);

  int fd_;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  std::function<bool()> give_up_;
  size_t bytes_read_ = 0;
};

}  // namespace sanctum::server

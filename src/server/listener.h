#pragma once
// Listening sockets and connection threads. Bind policy (from the original deployment): --host is
// repeatable and defaults to 127.0.0.1 alone; a loopback bind must succeed or start-up fails; a
// non-loopback bind that fails is logged and skipped (interfaces come up late at boot); the
// unspecified address (0.0.0.0 / ::) needs --allow-unspecified and logs a warning.
// Each accepted connection gets its own thread, so a health probe never waits behind anything.
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "server/app.h"
#include "server/socket_stream.h"

namespace sanctum::server {

class Listener {
 public:
  explicit Listener(App& app);
  ~Listener();

  // Applies the bind policy; throws sanctum::Error when a required bind fails.
  void bind();
  // Bound endpoints as "address:port" (the real port when 0 was asked for).
  std::vector<std::string> endpoints() const;
  void start();
  // No new connections; existing ones keep going.
  void stop_accepting();
  // Wakes every connection (idle keep-alive ones close; busy ones see their socket shut) and waits
  // up to `seconds` for the connection threads to finish.
  void close_connections(double seconds);
  size_t open_connections() const { return connections_.load(); }

 private:
  void accept_next(boost::asio::ip::tcp::acceptor& acceptor);
  void serve_connection(int fd, std::string peer);
  void handle_one(SocketStream& stream, boost::beast::flat_buffer& buffer, const std::string& peer, bool& keep_going);

  App& app_;
  boost::asio::io_context io_;
  std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> acceptors_;
  std::thread io_thread_;

  std::mutex mutex_;
  std::condition_variable all_closed_;
  std::set<SocketStream*> live_;
  std::atomic<size_t> connections_{0};
  std::atomic<bool> closing_{false};
};

}  // namespace sanctum::server

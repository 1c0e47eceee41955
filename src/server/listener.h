#pragma once
// Listening sockets and connection threads. Bind policy (from the original deployment): --host is
// repeatable and defaults to 127.0.0.1 alone; a loopback bind must succeed or start-up fails; a
// non-loopback bind that fails is logged and skipped (interfaces come up late at boot); the
// unspecified address (0.0.0.0 / ::) needs --allow-unspecified and logs a warning. --tls-host
// follows the same policy for the mTLS listener (--tls-port); --no-plain drops the plain one.
// Each accepted connection gets its own thread, so a health probe never waits behind anything; an
// mTLS connection gets a second one that carries its plaintext (see tls_connection.h).
// The plain listener checks bearer tokens when --auth-token-file is given (see auth.h); the mTLS
// listener's credential is the client certificate, whose CN becomes the request's identity.
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "server/auth.h"
#include "server/request_handler.h"
#include "server/socket_stream.h"
#include "server/tls_context.h"

namespace sanctum::server {

struct ListenerSecurity {
  bool plain = true;                // false: --no-plain
  std::shared_ptr<TlsContext> tls;  // null: no mTLS listener (SIGHUP reloads it)
  std::vector<std::string> tls_hosts{"127.0.0.1"};
  int tls_port = 8443;
  std::optional<BearerAuth> auth;       // the plain listener's token check
  double tls_handshake_timeout = 10.0;  // seconds
};

// One accepted connection as the request path sees it.
struct ConnectionInfo {
  std::string address;   // "ADDRESS:PORT" of the peer
  std::string identity;  // client certificate CN (mTLS only)
  bool loopback = false;
  bool tls = false;
};

class Listener {
 public:
  Listener(RequestHandler& handler, ListenerSecurity security = {});
  ~Listener();

  // Applies the bind policy; throws sanctum::Error when a required bind fails.
  void bind();
  // Bound endpoints of the plain (tls=false) or mTLS listener as "address:port" (the real port
  // when 0 was asked for).
  std::vector<std::string> endpoints(bool tls) const;
  void start();
  // No new connections; existing ones keep going.
  void stop_accepting();
  // Wakes every connection (idle keep-alive ones close; busy ones see their socket shut) and waits
  // up to `seconds` for the connection threads to finish.
  void close_connections(double seconds);
  size_t open_connections() const { return connections_.load(); }

 private:
  struct Acceptor {
    std::unique_ptr<boost::asio::ip::tcp::acceptor> socket;
    bool tls = false;
  };
  void bind_all(const std::vector<std::string>& hosts, int port, bool tls);
  void accept_next(Acceptor& acceptor);
  void serve_tls(int fd, ConnectionInfo info);
  void serve_connection(int fd, ConnectionInfo info);
  void connection_finished();
  void handle_one(SocketStream& stream, boost::beast::flat_buffer& buffer, const ConnectionInfo& info, bool& keep_going);

  RequestHandler& app_;
  ListenerSecurity security_;
  boost::asio::io_context io_;
  std::vector<Acceptor> acceptors_;
  std::thread io_thread_;

  std::mutex mutex_;
  std::condition_variable all_closed_;
  std::set<SocketStream*> live_;
  std::atomic<size_t> connections_{0};
  std::atomic<bool> closing_{false};
};

}  // namespace sanctum::server

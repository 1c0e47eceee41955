#include "server/listener.h"

#include <cctype>
#include <random>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "base/error.h"
#include "base/log.h"
#include "server/tls_connection.h"

namespace sanctum::server {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

Listener::Listener(RequestHandler& handler, ListenerSecurity security) : app_(handler), security_(std::move(security)) {}

Listener::~Listener() {
  stop_accepting();
  close_connections(1.0);
}

void Listener::bind() {
  const ListenOptions& opt = app_.listen_options();
  check(security_.plain || security_.tls, ErrorKind::invalid_argument, "--no-plain needs the mTLS listener (--tls-cert ...)");
  if (security_.plain) bind_all(opt.hosts, opt.port, false);
  if (security_.tls) bind_all(security_.tls_hosts, security_.tls_port, true);
  check(!acceptors_.empty(), ErrorKind::io, "no listen address could be bound");
}

void Listener::bind_all(const std::vector<std::string>& hosts, int port, bool tls) {
  const ListenOptions& opt = app_.listen_options();
  const std::string flag = tls ? "--tls-host " : "--host ";
  for (const std::string& host : hosts) {
    boost::system::error_code ec;
    net::ip::address address = net::ip::make_address(host, ec);
    check(!ec, ErrorKind::invalid_argument, flag + host + ": not an IP address (use a literal such as 127.0.0.1 or ::1)");
    const bool unspecified = address.is_unspecified();
    if (unspecified) {
      check(opt.allow_unspecified, ErrorKind::invalid_argument,
            flag + host + " binds every interface; pass --allow-unspecified if that is really intended");
      log::warn("binding the unspecified address: the server is reachable on every interface", {{"host", host}});
    }
    const bool required = address.is_loopback() || unspecified;
    tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
    auto acceptor = std::make_unique<tcp::acceptor>(io_);
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec && address.is_v6()) acceptor->set_option(net::ip::v6_only(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      std::string where = host + ":" + std::to_string(port);
      if (required) fail(ErrorKind::io, "cannot listen on " + where + (tls ? " (TLS)" : "") + ": " + ec.message());
      log::warn("skipping a listen address that failed to bind", {{"address", where}, {"error", ec.message()}});
      continue;
    }
    acceptors_.push_back({std::move(acceptor), tls});
  }
}

std::vector<std::string> Listener::endpoints(bool tls) const {
  std::vector<std::string> out;
  for (const auto& a : acceptors_) {
    if (a.tls != tls) continue;
    boost::system::error_code ec;
    tcp::endpoint e = a.socket->local_endpoint(ec);
    if (ec) continue;
    std::string addr = e.address().to_string();
    if (e.address().is_v6()) addr = "[" + addr + "]";
    out.push_back(addr + ":" + std::to_string(e.port()));
  }
  return out;
}

void Listener::start() {
  for (auto& a : acceptors_) accept_next(a);
  io_thread_ = std::thread([this] { io_.run(); });
}

namespace {

bool is_loopback(const net::ip::address& a) {
  if (a.is_loopback()) return true;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return net::ip::make_address_v4(net::ip::v4_mapped, a.to_v6()).is_loopback();
  return false;
}

}  // namespace

void Listener::accept_next(Acceptor& acceptor) {
  acceptor.socket->async_accept([this, &acceptor](boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.socket->is_open()) return;
    if (!ec) {
      boost::system::error_code peer_ec;
      tcp::endpoint peer = socket.remote_endpoint(peer_ec);
      ConnectionInfo info;
      info.address = peer_ec ? "unknown" : peer.address().to_string() + ":" + std::to_string(peer.port());
      info.loopback = !peer_ec && is_loopback(peer.address());
      info.tls = acceptor.tls;
      socket.set_option(tcp::no_delay(true), peer_ec);
      if (connections_.load() >= app_.listen_options().max_connections) {
        static const char kBusy[] =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 107\r\n"
            "Retry-After: 1\r\nConnection: close\r\n\r\n"
            "{\"error\":{\"message\":\"Too many open connections\",\"type\":\"service_unavailable_error\",\"param\":null,\"code\":null}}";
        // A TLS client cannot read plaintext: it just sees the connection close.
        socket.non_blocking(true, peer_ec);
        if (!acceptor.tls) net::write(socket, net::buffer(kBusy, sizeof kBusy - 1), peer_ec);
        socket.close(peer_ec);
      } else {
        int fd = socket.release(peer_ec);
        if (!peer_ec) {
          connections_.fetch_add(1);
          if (info.tls) std::thread([this, fd, info] { serve_tls(fd, info); }).detach();
          else std::thread([this, fd, info] { serve_connection(fd, info); }).detach();
        }
      }
    } else {
      log::warn("accept failed", {{"error", ec.message()}});
    }
    accept_next(acceptor);
  });
}

void Listener::stop_accepting() {
  net::post(io_, [this] {
    for (auto& a : acceptors_) {
      boost::system::error_code ec;
      a.socket->close(ec);
    }
  });
  if (io_thread_.joinable()) io_thread_.join();
  io_.stop();
}

void Listener::close_connections(double seconds) {
  closing_ = true;
  std::unique_lock<std::mutex> lock(mutex_);
  for (SocketStream* s : live_) s->shutdown();
  all_closed_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return connections_.load() == 0; });
}

namespace {

std::string new_request_id() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[40];
  std::snprintf(buf, sizeof buf, "req-%06llx%06llx", static_cast<unsigned long long>(salt & 0xffffff),
                static_cast<unsigned long long>(++counter & 0xffffffffffULL));
  return buf;
}

// A client-supplied X-Request-Id is kept when it is short and plain, so logs line up across hops.
std::string request_id_from(std::string_view header) {
  if (header.empty() || header.size() > 64) return new_request_id();
  for (char c : header)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != ':') return new_request_id();
  return std::string(header);
}

}  // namespace

void Listener::serve_tls(int fd, ConnectionInfo info) {
  std::unique_ptr<TlsConnection> conn;
  int plain_fd = -1;
  try {
    conn = TlsConnection::accept(security_.tls, fd, info.address, closing_, security_.tls_handshake_timeout);
    if (conn) plain_fd = conn->open_plaintext();
  } catch (const std::exception& e) {
    log::error("TLS connection fault", {{"client", info.address}, {"error", e.what()}});
    conn.reset();
  }
  if (!conn || plain_fd < 0) {
    connection_finished();
    return;
  }
  info.identity = conn->common_name();
  log::debug("TLS connection", {{"client", info.address}, {"identity", info.identity}, {"protocol", conn->protocol()}});
  // The plaintext end is served like any plain connection (and counted until it ends); this thread
  // carries the bytes and owns the TLS session.
  std::thread([this, plain_fd, info] { serve_connection(plain_fd, info); }).detach();
  conn->pump();
}

void Listener::connection_finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  connections_.fetch_sub(1);
  all_closed_.notify_all();
}

void Listener::serve_connection(int fd, ConnectionInfo info) {
  {
    SocketStream stream(fd);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.insert(&stream);
    }
    boost::beast::flat_buffer buffer;
    bool keep_going = !closing_;
    while (keep_going && !closing_) {
      try {
        handle_one(stream, buffer, info, keep_going);
      } catch (const std::exception& e) {
        log::error("connection fault", {{"client", info.address}, {"error", e.what()}});
        keep_going = false;
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(&stream);
  }
  connection_finished();
}

void Listener::handle_one(SocketStream& stream, boost::beast::flat_buffer& buffer, const ConnectionInfo& info, bool& keep_going) {
  const ListenOptions& opt = app_.listen_options();
  keep_going = false;
  const size_t read_before = stream.bytes_read();
  // Idle keep-alive connections close on their own when draining; a request already arriving is read.
  stream.set_give_up([&] { return (app_.draining() || closing_) && buffer.size() == 0 && stream.bytes_read() == read_before; });
  stream.set_deadline(std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                             std::chrono::duration<double>(opt.keep_alive_timeout)));
  http::request_parser<http::string_body> parser;
  parser.header_limit(64 * 1024);
  parser.body_limit(opt.body_limit);
  boost::system::error_code ec;
  http::read_header(stream, buffer, parser, ec);

  HttpRequest req;
  req.client = client_with_identity(info.identity, info.address);
  req.arrived = std::chrono::steady_clock::now();
  req.request_id = new_request_id();
  auto fail_fast = [&](int status, const std::string& message, const std::string& code) {
    req.keep_alive = false;
    Exchange ex(stream, req);
    ex.set_close_after();
    ex.respond_error(ApiError(status, "invalid_request_error", message, "", code));
    app_.observe_refused("unmatched", status);
    log::info("access", {{"request_id", req.request_id},
                         {"client", info.address},
                         {"identity", info.identity.empty() ? "-" : info.identity},
                         {"status", std::to_string(status)},
                         {"error", message}});
    stream.linger_close();
  };
  if (ec) {
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::timed_out || ec == net::error::connection_reset ||
        stream.bytes_read() == read_before)
      return;  // closed or idle: nothing to answer
    if (ec == http::error::header_limit) return fail_fast(431, "Request headers are too large", "headers_too_large");
    if (ec == http::error::body_limit) return fail_fast(413, payload_too_large(opt.body_limit).what(), "request_too_large");
    return fail_fast(400, "Malformed HTTP request: " + ec.message(), "bad_http");
  }
  auto& header = parser.get();
  // Credentials are checked on the header alone: no body is read and no 100 Continue is sent for a
  // request that will be refused.
  if (!info.tls && security_.auth) {
    const auto target_bv = header.target();
    const std::string_view target(target_bv.data(), target_bv.size());
    const auto method_bv = header.method_string();
    const auto authorization = header[http::field::authorization];
    const auto api_key = header["x-api-key"];
    const BearerAuth::Decision decision =
        security_.auth->decide(std::string_view(method_bv.data(), method_bv.size()), target.substr(0, target.find('?')),
                               std::string_view(authorization.data(), authorization.size()), info.loopback,
                               std::string_view(api_key.data(), api_key.size()));
    if (!BearerAuth::allowed(decision)) {
      const bool missing = decision == BearerAuth::Decision::deny_missing;
      req.method = std::string(method_bv);
      req.path = std::string(target.substr(0, target.find('?')));
      req.version = header.version();
      req.keep_alive = false;
      const auto rid = header["x-request-id"];
      req.request_id = request_id_from(std::string_view(rid.data(), rid.size()));
      const ApiError error(401, "invalid_request_error",
                           missing ? "Missing bearer token: send the header Authorization: Bearer <token> (or X-Api-Key: <token>)"
                                   : "Incorrect bearer token provided",
                           "", "invalid_api_key");
      Exchange ex(stream, req);
      ex.set_close_after();
      ex.respond(401, "application/json", error_body(error),
                 {{"WWW-Authenticate", missing ? "Bearer realm=\"sanctum\"" : "Bearer realm=\"sanctum\", error=\"invalid_token\""}});
      app_.observe_refused("unauthorized", 401);
      log::info("access", {{"request_id", req.request_id},
                           {"client", info.address},
                           {"identity", "-"},
                           {"method", req.method},
                           {"path", req.path},
                           {"status", "401"},
                           {"error", missing ? "missing bearer token" : "wrong bearer token"}});
      stream.linger_close();
      return;
    }
  }
  auto expect = header[http::field::expect];
  if (!expect.empty() && boost::beast::iequals(expect, "100-continue")) {
    if (!stream.write_all("HTTP/1.1 100 Continue\r\n\r\n")) return;
  }
  stream.set_give_up(nullptr);
  http::read(stream, buffer, parser, ec);
  if (ec) {
    if (ec == http::error::body_limit) return fail_fast(413, payload_too_large(opt.body_limit).what(), "request_too_large");
    if (ec == net::error::eof || ec == http::error::end_of_stream || ec == net::error::connection_reset) return;
    if (ec == net::error::timed_out) return fail_fast(408, "The request body did not arrive in time", "timeout");
    return fail_fast(400, "Malformed HTTP request: " + ec.message(), "bad_http");
  }
  auto& msg = parser.get();
  req.method = std::string(msg.method_string());
  const auto target_bv = msg.target();
  std::string_view target(target_bv.data(), target_bv.size());
  req.path = std::string(target.substr(0, target.find('?')));
  req.version = msg.version();
  req.keep_alive = msg.keep_alive();
  const auto rid = msg["x-request-id"];
  req.request_id = request_id_from(std::string_view(rid.data(), rid.size()));
  req.body = std::move(msg.body());
  const auto authorization = msg[http::field::authorization];
  req.authorization = std::string(authorization.data(), authorization.size());
  const auto x_api_key = msg["x-api-key"];
  req.x_api_key = std::string(x_api_key.data(), x_api_key.size());
  const auto if_none_match = msg[http::field::if_none_match];
  req.if_none_match = std::string(if_none_match.data(), if_none_match.size());
  req.loopback = info.loopback;
  req.tls = info.tls;
  Exchange ex(stream, req);
  app_.handle(ex);
  keep_going = req.keep_alive && !ex.close_after() && !app_.draining() && !closing_;
}

}  // namespace sanctum::server

#pragma once
// One HTTP/1.1 request to an upstream and its response, read incrementally: the head first (within
// the first-byte timeout), then the body piece by piece as it arrives (each read within the idle
// timeout, all within the total timeout). Beast parses; the connection comes from the pool and goes
// back only after a complete keep-alive response. Failures throw UpstreamFailure with a kind the
// router maps to failover decisions and metrics.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "router/router_config.h"
#include "router/upstream_pool.h"

namespace sanctum::router {

enum class FailureKind {
  connect,       // resolve / connect / TLS handshake failed
  timeout,       // connect, first byte, idle or total timeout
  closed,        // the upstream closed or reset the connection mid-exchange
  bad_response,  // not HTTP, or a body the router cannot use
  cancelled,     // the client went away; not the upstream's fault
};
const char* to_string(FailureKind kind);

class UpstreamFailure : public std::runtime_error {
 public:
  UpstreamFailure(FailureKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  FailureKind kind() const { return kind_; }

 private:
  FailureKind kind_;
};

struct UpstreamRequest {
  std::string method = "POST";
  std::string path;  // appended to the URL's base path
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

class UpstreamCall {
 public:
  using Clock = std::chrono::steady_clock;
  // `cancelled` is polled while waiting (the client disconnected).
  UpstreamCall(UpstreamPool& pool, const Timeouts& timeouts, std::function<bool()> cancelled);
  ~UpstreamCall();

  // Sends the request and reads the response head. A pooled connection that turns out to be dead
  // before any response byte is replaced by a fresh one once (the keep-alive race).
  void start(const UpstreamRequest& request);
  int status() const { return status_; }
  const std::string& content_type() const { return content_type_; }
  std::string header(const std::string& name) const;
  bool event_stream() const { return content_type_.rfind("text/event-stream", 0) == 0; }
  // Seconds from start() to the response head.
  double head_seconds() const { return head_seconds_; }

  // Appends the next body bytes to `out` (at least one unless the body is complete). Returns false
  // once the body is complete. Throws UpstreamFailure (timeout / closed / bad_response).
  bool read_some(std::string& out);
  // The whole body; bad_response when it exceeds `limit`.
  std::string read_all(size_t limit);
  bool complete() const { return complete_; }

 private:
  bool attempt(const UpstreamRequest& request, bool reused);
  [[noreturn]] void fail_read(const boost::system::error_code& ec, const char* phase);

  UpstreamPool& pool_;
  Timeouts timeouts_;
  std::function<bool()> cancelled_;
  std::unique_ptr<UpstreamConnection> conn_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::buffer_body>> parser_;
  Clock::time_point started_;
  Clock::time_point total_deadline_;
  int status_ = 0;
  std::string content_type_;
  double head_seconds_ = 0;
  bool complete_ = false;
  bool keep_alive_ = false;
  std::string last_error_;
};

}  // namespace sanctum::router

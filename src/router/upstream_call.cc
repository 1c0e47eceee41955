#include "router/upstream_call.h"

#include <cstdint>
#include <limits>

#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace sanctum::router {

namespace http = boost::beast::http;
namespace net = boost::asio;

const char* to_string(FailureKind kind) {
  switch (kind) {
    case FailureKind::connect: return "connect_error";
    case FailureKind::timeout: return "timeout";
    case FailureKind::closed: return "closed";
    case FailureKind::bad_response: return "bad_response";
    case FailureKind::cancelled: return "cancelled";
  }
  return "unknown";
}

namespace {
UpstreamCall::Clock::duration seconds(double s) {
  return std::chrono::duration_cast<UpstreamCall::Clock::duration>(std::chrono::duration<double>(s));
}
}  // namespace

UpstreamCall::UpstreamCall(UpstreamPool& pool, const Timeouts& timeouts, std::function<bool()> cancelled)
    : pool_(pool), timeouts_(timeouts), cancelled_(std::move(cancelled)) {}

UpstreamCall::~UpstreamCall() {
  if (conn_ && complete_ && keep_alive_ && buffer_.size() == 0) {
    ++conn_->requests_served;
    pool_.give_back(std::move(conn_));
  }
}

std::string UpstreamCall::header(const std::string& name) const {
  if (!parser_) return "";
  const auto v = parser_->get()[name];
  return std::string(v.data(), v.size());
}

void UpstreamCall::start(const UpstreamRequest& request) {
  started_ = Clock::now();
  total_deadline_ = started_ + seconds(timeouts_.total_s);
  std::unique_ptr<UpstreamConnection> pooled = pool_.take();
  if (pooled) {
    conn_ = std::move(pooled);
    if (attempt(request, true)) return;
  }
  std::string error;
  bool timed_out = false;
  const auto connect_deadline = std::min(Clock::now() + seconds(timeouts_.connect_s), total_deadline_);
  conn_ = UpstreamConnection::open(pool_.url(), pool_.tls(), connect_deadline, cancelled_, error, timed_out);
  if (!conn_) {
    if (cancelled_ && cancelled_()) throw UpstreamFailure(FailureKind::cancelled, "the client went away");
    throw UpstreamFailure(timed_out ? FailureKind::timeout : FailureKind::connect, error);
  }
  attempt(request, false);
}

// Returns false only when a reused connection died before answering (the caller retries fresh).
bool UpstreamCall::attempt(const UpstreamRequest& request, bool reused) {
  conn_->set_cancel(cancelled_);
  conn_->set_deadline(std::min(Clock::now() + seconds(timeouts_.first_byte_s), total_deadline_));
  http::request<http::string_body> req{request.method == "GET" ? http::verb::get : http::verb::post, pool_.url().target(request.path), 11};
  req.set(http::field::host, pool_.url().host_header());
  req.set(http::field::user_agent, "sanctum-router");
  req.keep_alive(true);
  for (const auto& [k, v] : request.headers) req.set(k, v);
  if (request.method != "GET") {
    req.set(http::field::content_type, request.content_type);
    req.body() = request.body;
    req.prepare_payload();
  }
  boost::system::error_code ec;
  http::write(*conn_, req, ec);
  buffer_.clear();
  parser_.emplace();
  parser_->header_limit(64 * 1024);
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());  // streams are unbounded; read_all() has its own limit
  if (!ec) http::read_header(*conn_, buffer_, *parser_, ec);
  if (ec) {
    if (ec == net::error::operation_aborted) throw UpstreamFailure(FailureKind::cancelled, "the client went away");
    const bool nothing_came = buffer_.size() == 0;
    const bool dead =
        ec == net::error::eof || ec == http::error::end_of_stream || ec == net::error::connection_reset || ec == net::error::broken_pipe;
    if (reused && dead && nothing_came) {
      conn_.reset();
      return false;
    }
    fail_read(ec, "waiting for the response head");
  }
  const auto& res = parser_->get();
  status_ = static_cast<int>(res.result_int());
  const auto ct = res[http::field::content_type];
  content_type_ = std::string(ct.data(), ct.size());
  keep_alive_ = res.keep_alive();
  head_seconds_ = std::chrono::duration<double>(Clock::now() - started_).count();
  complete_ = parser_->is_done();
  return true;
}

void UpstreamCall::fail_read(const boost::system::error_code& ec, const char* phase) {
  conn_.reset();  // never reused after a failure
  if (ec == net::error::operation_aborted) throw UpstreamFailure(FailureKind::cancelled, "the client went away");
  if (ec == net::error::timed_out) {
    const bool total = Clock::now() >= total_deadline_;
    throw UpstreamFailure(FailureKind::timeout, std::string(total ? "total timeout" : "no data in time") + " while " + phase);
  }
  if (ec == net::error::eof || ec == http::error::end_of_stream || ec == http::error::partial_message ||
      ec == net::error::connection_reset || ec == net::error::broken_pipe)
    throw UpstreamFailure(FailureKind::closed, std::string("the upstream closed the connection while ") + phase);
  throw UpstreamFailure(FailureKind::bad_response, std::string("bad HTTP from the upstream while ") + phase + ": " + ec.message());
}

bool UpstreamCall::read_some(std::string& out) {
  if (complete_) return false;
  char chunk[16384];
  for (;;) {
    conn_->set_deadline(std::min(Clock::now() + seconds(timeouts_.idle_s), total_deadline_));
    auto& body = parser_->get().body();
    body.data = chunk;
    body.size = sizeof chunk;
    boost::system::error_code ec;
    http::read_some(*conn_, buffer_, *parser_, ec);
    if (ec == http::error::need_buffer) ec = {};
    const size_t n = sizeof chunk - body.size;
    if (ec) fail_read(ec, "reading the response body");
    out.append(chunk, n);
    if (parser_->is_done()) {
      complete_ = true;
      return n > 0;
    }
    if (n > 0) return true;
  }
}

std::string UpstreamCall::read_all(size_t limit) {
  std::string body;
  while (read_some(body))
    if (body.size() > limit) {
      conn_.reset();
      throw UpstreamFailure(FailureKind::bad_response, "the upstream's response is larger than " + std::to_string(limit) + " bytes");
    }
  return body;
}

}  // namespace sanctum::router

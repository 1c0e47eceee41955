#include "server/image_fetch.h"

#include <openssl/ssl.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>
#include <string_view>

#include "server/api_error.h"

namespace sanctum::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct Url {
  bool tls = false;
  std::string host, port, target;
};

std::optional<Url> parse_url(std::string_view s) {
  Url u;
  size_t at;
  if (s.rfind("https://", 0) == 0) u.tls = true, at = 8;
  else if (s.rfind("http://", 0) == 0) at = 7;
  else return std::nullopt;
  const size_t path = s.find_first_of("/?#", at);
  std::string_view authority = s.substr(at, path == std::string_view::npos ? std::string_view::npos : path - at);
  if (authority.find('@') != std::string_view::npos) return std::nullopt;  // no credentials in image URLs
  std::string_view host = authority, port;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return std::nullopt;
      port = authority.substr(close + 2);
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return std::nullopt;
  for (char c : port)
    if (c < '0' || c > '9') return std::nullopt;
  u.host = std::string(host);
  u.port = port.empty() ? (u.tls ? "443" : "80") : std::string(port);
  std::string target = path == std::string_view::npos ? "/" : std::string(s.substr(path));
  if (const size_t hash = target.find('#'); hash != std::string::npos) target.erase(hash);
  if (target.empty() || target[0] == '?') target.insert(0, "/");
  u.target = std::move(target);
  return u;
}

struct Outcome {
  bool done = false;
  std::string error;  // empty: success
  http::response<http::vector_body<char>> response;
};

// One GET as a chain of asynchronous steps on the caller's io_context, so that run_for() bounds the
// whole exchange (resolve included). The caller's stack owns it: at the deadline the streams close
// with it and the io_context drops the pending handlers without running them.
class Fetcher {
 public:
  Fetcher(asio::io_context& ioc, asio::ssl::context& tls, const Url& u, size_t max_bytes, Outcome& out)
      : u_(u), max_bytes_(max_bytes), out_(out), resolver_(ioc), plain_(ioc) {
    if (u.tls) secure_.emplace(ioc, tls);
    request_.method(http::verb::get);
    request_.target(u.target);
    request_.set(http::field::host, u.host);
    request_.set(http::field::user_agent, "sanctum");
    request_.set(http::field::accept, "image/*");
    parser_.body_limit(max_bytes);
    parser_.header_limit(64 * 1024);
  }

  void start() {
    if (secure_ &&
        (!SSL_set_tlsext_host_name(secure_->native_handle(), u_.host.c_str()) || !SSL_set1_host(secure_->native_handle(), u_.host.c_str())))
      return finish("could not set the TLS host name");
    resolver_.async_resolve(u_.host, u_.port, [this](beast::error_code ec, const asio::ip::tcp::resolver::results_type& endpoints) {
      if (ec) return finish(ec.message());
      beast::tcp_stream& socket = secure_ ? beast::get_lowest_layer(*secure_) : plain_;
      socket.async_connect(endpoints, [this](beast::error_code ec, const asio::ip::tcp::endpoint&) {
        if (ec) return finish(ec.message());
        if (!secure_) return send();
        secure_->async_handshake(asio::ssl::stream_base::client, [this](beast::error_code ec) {
          if (ec) return finish(ec.message());
          send();
        });
      });
    });
  }

 private:
  template <class F>
  void with_stream(F&& f) {
    if (secure_) f(*secure_);
    else f(plain_);
  }

  void send() {
    with_stream([this](auto& s) {
      http::async_write(s, request_, [this](beast::error_code ec, size_t) {
        if (ec) return finish(ec.message());
        read_header();
      });
    });
  }

  void read_header() {
    with_stream([this](auto& s) {
      http::async_read_header(s, buffer_, parser_, [this](beast::error_code ec, size_t) {
        if (ec) return finish(ec.message());
        // Checked here as well as by the parser's body limit, which Beast 1.74 does not apply every time.
        if (parser_.content_length() && *parser_.content_length() > max_bytes_) return finish("body limit exceeded");
        read_body();
      });
    });
  }

  void read_body() {
    with_stream([this](auto& s) {
      http::async_read(s, buffer_, parser_, [this](beast::error_code ec, size_t) {
        if (ec) return finish(ec.message());
        out_.response = parser_.release();
        finish(out_.response.body().size() > max_bytes_ ? "body limit exceeded" : "");
      });
    });
  }

  void finish(std::string error) {
    out_.error = std::move(error);
    out_.done = true;
  }

  const Url& u_;
  size_t max_bytes_;
  Outcome& out_;
  asio::ip::tcp::resolver resolver_;
  beast::tcp_stream plain_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure_;
  beast::flat_buffer buffer_;
  http::request<http::empty_body> request_;
  http::response_parser<http::vector_body<char>> parser_;
};

}  // namespace

std::string fetch_image_url(const std::string& url, const FetchLimits& limits, const std::string& param) {
  const auto deadline = std::chrono::steady_clock::now() + limits.timeout;
  std::string current = url;
  for (int hop = 0; hop <= limits.max_redirects; ++hop) {
    const std::optional<Url> u = parse_url(current);
    if (!u) throw bad_request("the image URL '" + current + "' is not an http(s) URL this server can fetch", param, "invalid_image_url");
    asio::io_context ioc;
    asio::ssl::context tls(asio::ssl::context::tls_client);
    tls.set_default_verify_paths();
    tls.set_verify_mode(asio::ssl::verify_peer);
    Outcome out;
    Fetcher fetcher(ioc, tls, *u, limits.max_bytes, out);
    fetcher.start();
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left > std::chrono::steady_clock::duration::zero()) ioc.run_for(left);
    if (!out.done)
      throw bad_request("fetching the image URL took longer than " + std::to_string(limits.timeout.count()) + " ms", param,
                        "image_fetch_failed");
    if (!out.error.empty()) {
      if (out.error.find("body limit") != std::string::npos)
        throw bad_request("the image at the URL is over the limit of " + std::to_string(limits.max_bytes) + " bytes", param,
                          "image_too_large");
      throw bad_request("fetching the image URL failed: " + out.error, param, "image_fetch_failed");
    }
    const unsigned status = out.response.result_int();
    if (status == 200) return std::string(out.response.body().begin(), out.response.body().end());
    const auto location = out.response.find(http::field::location);
    if (status >= 300 && status < 400 && location != out.response.end()) {
      std::string next(location->value());
      if (!next.empty() && next[0] == '/') next = (u->tls ? "https://" : "http://") + u->host + ":" + u->port + next;
      current = std::move(next);
      continue;
    }
    throw bad_request("fetching the image URL answered HTTP " + std::to_string(status), param, "image_fetch_failed");
  }
  throw bad_request("the image URL redirected more than " + std::to_string(limits.max_redirects) + " times", param, "image_fetch_failed");
}

}  // namespace sanctum::server

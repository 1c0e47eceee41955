#include "server/image_fetch.h"

#include <openssl/ssl.h>

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format off
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
// clang-format on
#include <optional>
#include <string_view>

#include "server/api_error.h"

namespace sanctum::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::use_awaitable;

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

template <class Stream>
asio::awaitable<void> exchange(Stream& stream, const Url& u, size_t max_bytes, Outcome& out) {
  http::request<http::empty_body> req{http::verb::get, u.target, 11};
  req.set(http::field::host, u.host);
  req.set(http::field::user_agent, "sanctum");
  req.set(http::field::accept, "image/*");
  co_await http::async_write(stream, req, use_awaitable);
  beast::flat_buffer buffer;
  http::response_parser<http::vector_body<char>> parser;
  parser.body_limit(max_bytes);
  parser.header_limit(64 * 1024);
  co_await http::async_read_header(stream, buffer, parser, use_awaitable);
  // Checked here as well as by the parser's body limit, which Beast 1.74 does not apply every time.
  if (parser.content_length() && *parser.content_length() > max_bytes) throw std::runtime_error("body limit exceeded");
  co_await http::async_read(stream, buffer, parser, use_awaitable);
  out.response = parser.release();
  if (out.response.body().size() > max_bytes) throw std::runtime_error("body limit exceeded");
}

asio::awaitable<void> get(asio::io_context& ioc, asio::ssl::context& tls, const Url& u, size_t max_bytes, Outcome& out) {
  try {
    asio::ip::tcp::resolver resolver(ioc);
    auto endpoints = co_await resolver.async_resolve(u.host, u.port, use_awaitable);
    if (!u.tls) {
      beast::tcp_stream stream(ioc);
      co_await stream.async_connect(endpoints, use_awaitable);
      co_await exchange(stream, u, max_bytes, out);
    } else {
      beast::ssl_stream<beast::tcp_stream> stream(ioc, tls);
      if (!SSL_set_tlsext_host_name(stream.native_handle(), u.host.c_str()) || !SSL_set1_host(stream.native_handle(), u.host.c_str()))
        throw std::runtime_error("could not set the TLS host name");
      co_await beast::get_lowest_layer(stream).async_connect(endpoints, use_awaitable);
      co_await stream.async_handshake(asio::ssl::stream_base::client, use_awaitable);
      co_await exchange(stream, u, max_bytes, out);
    }
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  out.done = true;
}

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
    asio::co_spawn(ioc, get(ioc, tls, *u, limits.max_bytes, out), asio::detached);
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

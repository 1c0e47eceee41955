#pragma once
// One table of HTTP routes for `sanctum serve` and `sanctum route`: (method, path pattern) ->
// handler. A pattern is an exact path ("/health") or a prefix ending in one trailing parameter
// ("/v1/models/{model}": "/v1/models/" followed by at least one character, handed to the handler).
// The path picks one pattern, an exact path before any prefix and a longer prefix before a shorter;
// the method then picks its handler. A path no pattern matches is a 404; a matched path asked with
// a method it does not serve is a 405 whose Allow header lists the methods it does.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/exchange.h"

namespace sanctum::server {

// What a request's method and path select.
struct RouteMatch {
  enum class Kind { found, wrong_method, unknown_path };
  Kind kind = Kind::unknown_path;
  size_t index = 0;       // found: the route's position, in the order the routes were added
  std::string name;       // the pattern, as logs and metrics label the route; "unmatched" when unknown
  std::string allow;      // wrong_method: the pattern's methods, "GET, POST"
  std::string_view rest;  // found on a prefix pattern: the path after the prefix (a view into `path`)
};

// The matching alone, without handlers.
class RouteIndex {
 public:
  // Returns the route's index. The same (method, pattern) twice is a programming error and throws.
  size_t add(std::string method, std::string pattern);
  RouteMatch match(std::string_view method, std::string_view path) const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::string prefix;  // the pattern up to its trailing parameter; empty for an exact pattern
  };
  // The pattern `path` selects: exact first, then the longest prefix; empty when none matches.
  std::string_view select(std::string_view path, std::string_view& rest) const;

  std::vector<Route> routes_;
};

// Sets the route name on `ex` and answers a match that found no handler: 405 with Allow, or throws
// the 404 naming the method and path.
void answer_unrouted(Exchange& ex, const RouteMatch& match);

// `Context` is what a handler needs besides the exchange and the path's parameter (the router
// passes the caller's identity and the outcome it logs).
template <class... Context>
class RouteTable {
 public:
  using Handler = std::function<void(Exchange&, std::string_view param, Context...)>;

  RouteTable& add(std::string method, std::string pattern, Handler handler) {
    const size_t index = index_.add(std::move(method), std::move(pattern));
    handlers_.resize(index + 1);
    handlers_[index] = std::move(handler);
    return *this;
  }

  void dispatch(Exchange& ex, Context... context) const {
    const RouteMatch m = index_.match(ex.request().method, ex.request().path);
    if (m.kind != RouteMatch::Kind::found) return answer_unrouted(ex, m);
    ex.route = m.name;
    handlers_[m.index](ex, m.rest, context...);
  }

 private:
  RouteIndex index_;
  std::vector<Handler> handlers_;
};

}  // namespace sanctum::server

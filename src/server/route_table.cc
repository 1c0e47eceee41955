#include "server/route_table.h"

#include <stdexcept>

namespace sanctum::server {

size_t RouteIndex::add(std::string method, std::string pattern) {
  // "/a/b" is exact; "/a/{x}" is the prefix "/a/" and a parameter; nothing else.
  const size_t open = pattern.find('{');
  const bool exact = open == std::string::npos && pattern.find('}') == std::string::npos;
  const bool prefixed = open != std::string::npos && open + 2 < pattern.size() && pattern.find('}') == pattern.size() - 1;
  if (pattern.empty() || pattern.front() != '/' || !(exact || prefixed))
    throw std::invalid_argument("route pattern '" + pattern + "': write an exact path or a path ending in one {parameter}");
  for (const Route& r : routes_)
    if (r.method == method && r.pattern == pattern) throw std::invalid_argument("route " + method + " " + pattern + " added twice");
  std::string prefix = exact ? std::string() : pattern.substr(0, open);
  routes_.push_back({std::move(method), std::move(pattern), std::move(prefix)});
  return routes_.size() - 1;
}

std::string_view RouteIndex::select(std::string_view path, std::string_view& rest) const {
  for (const Route& r : routes_)
    if (r.prefix.empty() && r.pattern == path) return r.pattern;
  const Route* best = nullptr;
  for (const Route& r : routes_) {
    const bool matches = !r.prefix.empty() && path.size() > r.prefix.size() && path.starts_with(r.prefix);
    if (matches && (!best || r.prefix.size() > best->prefix.size())) best = &r;
  }
  if (!best) return {};
  rest = path.substr(best->prefix.size());
  return best->pattern;
}

RouteMatch RouteIndex::match(std::string_view method, std::string_view path) const {
  RouteMatch m;
  m.name = "unmatched";
  std::string_view rest;
  const std::string_view pattern = select(path, rest);
  if (pattern.empty()) return m;
  m.name = pattern;
  m.kind = RouteMatch::Kind::wrong_method;
  for (size_t i = 0; i < routes_.size(); ++i) {
    if (routes_[i].pattern != pattern) continue;
    if (routes_[i].method == method) {
      m.kind = RouteMatch::Kind::found;
      m.index = i;
      m.rest = rest;
      m.allow.clear();
      return m;
    }
    m.allow += (m.allow.empty() ? "" : ", ") + routes_[i].method;
  }
  return m;
}

void answer_unrouted(Exchange& ex, const RouteMatch& match) {
  const HttpRequest& req = ex.request();
  ex.route = match.name;
  if (match.kind == RouteMatch::Kind::wrong_method) {
    ex.respond(405, "application/json", error_body(method_not_allowed(req.method, req.path)), {{"Allow", match.allow}});
    return;
  }
  throw not_found("Unknown route " + req.method + " " + req.path);
}

}  // namespace sanctum::server

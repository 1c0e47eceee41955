#include "server/ui/ui_routes.h"

#include <string>
#include <utility>
#include <vector>

#include "server/api_error.h"
#include "server/ui/ui_assets.h"

namespace sanctum::server::ui {
namespace {

const char* const kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
    "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const Asset* find(std::string_view name) {
  for (const Asset& a : assets())
    if (a.name == name) return &a;
  return nullptr;
}

// If-None-Match lists one or more quoted tags, or "*".
bool etag_matches(std::string_view if_none_match, std::string_view etag) {
  if (if_none_match.empty()) return false;
  if (if_none_match == "*") return true;
  size_t at = 0;
  while ((at = if_none_match.find(etag, at)) != std::string_view::npos) {
    const bool starts = at == 0 || if_none_match[at - 1] == ' ' || if_none_match[at - 1] == ',' || if_none_match[at - 1] == '/';
    const size_t end = at + etag.size();
    const bool ends = end == if_none_match.size() || if_none_match[end] == ',' || if_none_match[end] == ' ';
    if (starts && ends) return true;
    at = end;
  }
  return false;
}

void serve(Exchange& ex, std::string_view name) {
  const Asset* asset = find(name);
  if (!asset) throw not_found("No page file /ui/" + std::string(name) + ": the page's files are listed in src/server/ui/www");
  std::vector<std::pair<std::string, std::string>> headers = {{"Content-Security-Policy", kCsp},
                                                              {"X-Content-Type-Options", "nosniff"},
                                                              {"X-Frame-Options", "DENY"},
                                                              {"Referrer-Policy", "no-referrer"},
                                                              {"Cache-Control", "no-cache"},
                                                              {"ETag", std::string(asset->etag)},
                                                              {"Cross-Origin-Opener-Policy", "same-origin"}};
  if (etag_matches(ex.request().if_none_match, asset->etag)) {
    ex.respond(304, asset->content_type, "", headers);
    return;
  }
  ex.respond(200, asset->content_type, asset->body, headers);
}

}  // namespace

void add_routes(RouteTable<>& routes) {
  routes.add("GET", "/", [](Exchange& ex, std::string_view) { serve(ex, "index.html"); })
      .add("GET", "/ui/{file}", [](Exchange& ex, std::string_view file) { serve(ex, file); });
}

}  // namespace sanctum::server::ui

#pragma once
// An upstream base URL: http:// or https://, a host (name, IPv4, or [IPv6]), an optional port and
// an optional base path that request paths are appended to ("http://10.0.0.5:8080/sanctum").
#include <string>

namespace sanctum::router {

struct UpstreamUrl {
  bool tls = false;
  std::string host;  // without brackets
  int port = 0;
  std::string base_path;  // "" or "/prefix" (no trailing slash)
  std::string text;       // as written, for logs and metric labels

  std::string host_header() const;  // host[:port] as the Host header wants it
  std::string target(const std::string& path) const { return base_path + path; }
};

// Throws sanctum::Error(invalid_argument) with the reason; `what` names the key in messages.
UpstreamUrl parse_upstream_url(const std::string& url, const std::string& what);

}  // namespace sanctum::router

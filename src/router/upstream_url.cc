#include "router/upstream_url.h"

#include <cctype>

#include "base/error.h"

namespace sanctum::router {

std::string UpstreamUrl::host_header() const {
  const bool v6 = host.find(':') != std::string::npos;
  std::string h;
  if (v6) h += '[';
  h += host;
  if (v6) h += ']';
  if ((tls && port != 443) || (!tls && port != 80)) {
    h += ':';
    h += std::to_string(port);
  }
  return h;
}

UpstreamUrl parse_upstream_url(const std::string& url, const std::string& what) {
  auto bad = [&](const std::string& why) {
    fail(ErrorKind::invalid_argument, what + ": '" + url + "' " + why + " (expected http[s]://HOST[:PORT][/PATH])");
  };
  UpstreamUrl u;
  u.text = url;
  std::string rest;
  if (url.rfind("http://", 0) == 0) rest = url.substr(7);
  else if (url.rfind("https://", 0) == 0) {
    u.tls = true;
    rest = url.substr(8);
  } else {
    bad("is not an http:// or https:// URL");
  }
  for (char c : url)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) bad("contains spaces or control characters");
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) u.base_path = rest.substr(slash);
  while (!u.base_path.empty() && u.base_path.back() == '/') u.base_path.pop_back();
  if (u.base_path.find_first_of("?#") != std::string::npos) bad("has a query or fragment");
  if (authority.find('@') != std::string::npos) bad("carries credentials (use api_key_env)");
  std::string port_text;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) bad("has an unclosed IPv6 bracket");
    u.host = authority.substr(1, close - 1);
    std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') bad("has junk after the IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) bad("has an empty port");
    }
  } else {
    const size_t colon = authority.find(':');
    u.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) bad("has an empty port");
    }
  }
  if (u.host.empty()) bad("has no host");
  if (!port_text.empty()) {
    for (char c : port_text)
      if (!std::isdigit(static_cast<unsigned char>(c))) bad("has a port that is not a number");
    if (port_text.size() > 5 || std::stoi(port_text) < 1 || std::stoi(port_text) > 65535) bad("has a port outside 1..65535");
    u.port = std::stoi(port_text);
  } else {
    u.port = u.tls ? 443 : 80;
  }
  return u;
}

}  // namespace sanctum::router

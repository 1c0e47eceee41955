#include "server/auth.h"

#include <openssl/crypto.h>

#include "base/error.h"
#include "security/secure_io.h"
#include "security/sha256.h"

namespace sanctum::server {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace

std::string client_with_identity(std::string_view identity, std::string_view address) {
  if (identity.empty()) return std::string(address);
  std::string out;
  out.reserve(identity.size() + 1 + address.size());
  for (char c : identity) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f || c == '@') ? '?' : c;
  }
  out += '@';
  out.append(address);
  return out;
}

ClientParts split_client(std::string_view client) {
  const size_t at = client.rfind('@');
  if (at == std::string_view::npos) return {"", std::string(client)};
  return {std::string(client.substr(0, at)), std::string(client.substr(at + 1))};
}

std::optional<std::string_view> bearer_token(std::string_view authorization) {
  authorization = trim(authorization);
  const size_t space = authorization.find_first_of(" \t");
  if (space == std::string_view::npos || !iequals(authorization.substr(0, space), "bearer")) return std::nullopt;
  std::string_view token = trim(authorization.substr(space + 1));
  if (token.empty()) return std::nullopt;
  return token;
}

BearerAuth::BearerAuth(std::string_view token, bool loopback_bypass) : loopback_bypass_(loopback_bypass) {
  token = trim(token);
  check(!token.empty(), ErrorKind::invalid_input, "the bearer token is empty");
  for (char c : token) {
    const auto u = static_cast<unsigned char>(c);
    check(u > 0x20 && u < 0x7f, ErrorKind::invalid_input,
          "the bearer token must be printable ASCII without spaces (an HTTP header carries it)");
  }
  token_digest_ = security::sha256(token);
}

BearerAuth BearerAuth::from_file(const std::string& path, bool loopback_bypass) {
  std::string bytes;
  try {
    bytes = security::read_private(path);
  } catch (const Error& e) {
    fail(e.kind(), std::string("--auth-token-file: ") + e.what());
  }
  check(!trim(bytes).empty(), ErrorKind::invalid_input, "--auth-token-file " + path + ": the file is empty");
  try {
    return BearerAuth(bytes, loopback_bypass);
  } catch (const Error& e) {
    fail(e.kind(), "--auth-token-file " + path + ": " + e.what());
  }
}

bool BearerAuth::token_matches(std::string_view presented) const {
  // Digests of equal length: CRYPTO_memcmp's time depends on neither the token nor its length.
  const security::Sha256Digest d = security::sha256(presented);
  return CRYPTO_memcmp(d.data(), token_digest_.data(), d.size()) == 0;
}

BearerAuth::Decision BearerAuth::decide(std::string_view method, std::string_view path, std::string_view authorization,
                                        bool peer_is_loopback, std::string_view x_api_key) const {
  if (method == "GET" && (path == "/health" || path == "/" || path.starts_with("/ui/"))) return Decision::allow_open_route;
  if (loopback_bypass_ && peer_is_loopback) return Decision::allow_loopback;
  std::optional<std::string_view> token = bearer_token(authorization);
  if (!token && !trim(x_api_key).empty()) token = trim(x_api_key);
  if (!token) return Decision::deny_missing;
  return token_matches(*token) ? Decision::allow_token : Decision::deny_wrong;
}

}  // namespace sanctum::server

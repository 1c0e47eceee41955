#include "security/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "base/error.h"

namespace sanctum::security {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

MdCtx new_sha256_ctx() {
  MdCtx ctx(EVP_MD_CTX_new());
  check(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1, ErrorKind::internal, "OpenSSL: SHA-256 init failed");
  return ctx;
}

Sha256Digest finish(EVP_MD_CTX* ctx) {
  Sha256Digest d{};
  unsigned int n = 0;
  check(EVP_DigestFinal_ex(ctx, d.data(), &n) == 1 && n == d.size(), ErrorKind::internal, "OpenSSL: SHA-256 final failed");
  return d;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Sha256Digest sha256(std::string_view bytes) {
  MdCtx ctx = new_sha256_ctx();
  check(EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) == 1, ErrorKind::internal, "OpenSSL: SHA-256 update failed");
  return finish(ctx.get());
}

std::string to_hex(const uint8_t* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[data[i] >> 4];
    s[2 * i + 1] = digits[data[i] & 15];
  }
  return s;
}

std::optional<Sha256Digest> digest_from_hex(std::string_view hex) {
  Sha256Digest d{};
  if (hex.size() != 64) return std::nullopt;
  for (size_t i = 0; i < 32; ++i) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    d[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return d;
}

FileDigest hash_file(const PinnedFile& file, uint8_t* buffer, size_t buffer_size) {
  const int fd = file.fd();
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // advisory: doubles the kernel's read-ahead window
  MdCtx ctx = new_sha256_ctx();
  FileDigest out;
  for (;;) {
    ssize_t n = ::pread(fd, buffer, buffer_size, static_cast<off_t>(out.bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(ErrorKind::io, file.path() + ": read failed: " + std::strerror(errno));
    if (n == 0) break;
    check(EVP_DigestUpdate(ctx.get(), buffer, static_cast<size_t>(n)) == 1, ErrorKind::internal, "OpenSSL: SHA-256 update failed");
    out.bytes += static_cast<uint64_t>(n);
  }
  // The loader maps this descriptor next: it should read ahead as a fresh open would.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL);
  out.digest = finish(ctx.get());
  return out;
}

}  // namespace sanctum::security

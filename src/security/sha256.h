#pragma once
// SHA-256 through OpenSSL EVP (SHA-NI / AVX2 paths come from OpenSSL), hex helpers, and a file hasher
// built for throughput: large sequential reads with posix_fadvise(SEQUENTIAL).
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/pinned_file.h"

namespace sanctum::security {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest sha256(std::string_view bytes);
std::string to_hex(const uint8_t* data, size_t n);
inline std::string to_hex(const Sha256Digest& d) { return to_hex(d.data(), d.size()); }
// Parses exactly 64 hex digits (either case). nullopt on anything else.
std::optional<Sha256Digest> digest_from_hex(std::string_view hex);

// Read buffer for hash_file: large enough that each read() is a long sequential request.
inline constexpr size_t kHashReadBuffer = size_t{8} << 20;

struct FileDigest {
  Sha256Digest digest{};
  uint64_t bytes = 0;
};

// Hashes one held-open file through its descriptor with reads of `buffer_size` bytes into `buffer`
// (caller-owned so a worker reuses one allocation across files), leaving its offset alone. Throws
// Error naming the path.
FileDigest hash_file(const PinnedFile& file, uint8_t* buffer, size_t buffer_size);

}  // namespace sanctum::security

#pragma once
// The trust gate the server runs before it binds a socket or maps a weight: the manifest's Ed25519
// signature first (over the exact bytes that are then parsed), then every listed path must resolve
// to a regular file inside the model directory, every file the load would read must be listed, and
// every listed file must hash (in parallel) to its manifest digest. Any failure throws
// sanctum::Error whose message names the file. The files stay open for the load (VerifyReport::pinned).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/pinned_file.h"

namespace sanctum::security {

struct VerifyReport {
  bool signature_checked = false;
  std::string key_fingerprint;  // "ed25519:..." when signature_checked
  size_t files = 0;
  uint64_t bytes = 0;
  int threads = 0;
  double hash_seconds = 0;   // parallel hashing only
  double total_seconds = 0;  // signature + path checks + hashing: the manifest_verify phase
  // Every listed file, held open since it was hashed, by its manifest path: pass it to load_model so
  // the load maps these descriptors (the bytes hashed) and refuses a file swapped or written since.
  PinnedFiles pinned;
  double gb_per_s() const { return hash_seconds > 0 ? static_cast<double>(bytes) / hash_seconds / 1e9 : 0.0; }
};

// Reads the manifest once and verifies its detached signature over those bytes; returns them so the
// caller parses exactly what was verified. signature_path defaults to manifest_path + ".sig".
// Throws "signature verification FAILED: ..." when the signature does not match.
std::string read_signed_manifest(const std::string& manifest_path, const std::optional<std::string>& signature_path,
                                 const std::string& public_key_path, std::string* fingerprint = nullptr);

// The gate. With no public key the signature is not checked (an unsigned manifest, as `sha256sum -c`
// would check it); a signature path without a public key is an invalid_argument error, because a
// signature nobody checks is worse than none. threads <= 0 uses every available core.
VerifyReport verify_model_against_manifest(const std::string& model_dir, const std::string& manifest_path,
                                           const std::optional<std::string>& signature_path,
                                           const std::optional<std::string>& public_key_path, int threads = 0);

struct GeneratedManifest {
  std::string text;  // coreutils format, sorted by path
  size_t files = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  int threads = 0;
};

// Hashes every file a load would read (files_a_load_reads) and formats the manifest. Refuses files
// that resolve outside the directory, dangling symlinks and shards an index names but which are missing.
GeneratedManifest generate_manifest(const std::string& model_dir, int threads = 0);

}  // namespace sanctum::security

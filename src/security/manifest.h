#pragma once
// Weight manifests in the coreutils format that `sha256sum -c` and `shasum -a 256 -c` check:
//   <64 hex digits><space><space or '*'><relative path>\n
// The parser is strict: every malformed line is an error naming the line, and the paths must stay
// inside the model directory lexically (no absolute paths, no '..', no empty components).
#include <string>
#include <string_view>
#include <vector>

#include "security/sha256.h"

namespace sanctum::security {

struct ManifestEntry {
  Sha256Digest digest{};
  std::string path;  // normalized: relative, '/'-separated, no '.' or empty components
  int line = 0;      // 1-based line in the manifest it came from (0 for generated entries)
};

struct Manifest {
  std::vector<ManifestEntry> entries;  // in file order
};

// Parses manifest text. `source` (usually the file path) prefixes every error:
//   "MANIFEST line 3: path '../x' leaves the model directory ('..' component)".
// Throws Error(invalid_input).
Manifest parse_manifest(std::string_view text, const std::string& source);

// Checks and normalizes one relative path (drops '.' components). Returns an empty string and sets
// `why` when the path is unacceptable. Exposed for the loader's own file lists and for tests.
std::string normalize_relative_path(std::string_view path, std::string* why);

// Writes entries as "<hex>  <path>\n" in the order given (callers sort for stable output).
std::string format_manifest(const std::vector<ManifestEntry>& entries);

}  // namespace sanctum::security

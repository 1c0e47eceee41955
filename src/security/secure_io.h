#pragma once
// File I/O for secrets and signed artifacts: exclusive creation with an exact mode, atomic replace,
// and reading a private key only when its permissions keep it private.
#include <sys/types.h>

#include <cstddef>
#include <string>

namespace sanctum::security {

enum class WriteMode {
  exclusive,  // fail if the path exists (O_CREAT|O_EXCL): never clobber a key by accident
  replace,    // write a temporary file beside it, fsync, rename over: readers see old or new, never half
};

// Writes `bytes` to `path` with permission bits exactly `mode` (umask does not widen or narrow them).
// Throws Error naming the path; exclusive mode says to pass --force when the file exists.
void write_file(const std::string& path, const std::string& bytes, mode_t mode, WriteMode how);

// Reads a whole file, refusing one longer than max_bytes (a manifest path pointing at /dev/zero must
// not exhaust memory). Throws Error(not_found | io | invalid_input) naming the path.
inline constexpr size_t kMaxSmallFile = size_t{64} << 20;
std::string read_all(const std::string& path, size_t max_bytes = kMaxSmallFile);

// Reads a private key file, refusing one that is not a regular file or that group or others can
// read or write ("run: chmod 600 PATH").
std::string read_private(const std::string& path);

// True when `path` exists (any type, symlinks not followed).
bool path_exists(const std::string& path);

}  // namespace sanctum::security

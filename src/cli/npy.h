#pragma once
// Minimal NumPy v1.0 .npy writer for the parity subcommands' outputs.
#include <cstdint>
#include <string>
#include <vector>

namespace sanctum::cli {

// A 2-D little-endian float32 array (rows, cols), row-major. Throws Error(io) naming the path.
void write_npy(const std::string& path, const std::vector<float>& data, int64_t rows, int64_t cols);

}  // namespace sanctum::cli

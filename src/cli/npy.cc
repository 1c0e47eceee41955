#include "cli/npy.h"

#include <cstdio>

#include "base/error.h"

namespace sanctum::cli {

void write_npy(const std::string& path, const std::vector<float>& data, int64_t rows, int64_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  FILE* f = std::fopen(path.c_str(), "wb");
  check(f != nullptr, ErrorKind::io, path + ": cannot open for writing");
  const char magic[] = "\x93NUMPY\x01\x00";
  uint16_t len = static_cast<uint16_t>(header.size());
  bool ok = std::fwrite(magic, 1, 8, f) == 8 && std::fwrite(&len, 2, 1, f) == 1 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(data.data(), sizeof(float), data.size(), f) == data.size();
  ok = (std::fclose(f) == 0) && ok;
  check(ok, ErrorKind::io, path + ": write failed");
}

}  // namespace sanctum::cli

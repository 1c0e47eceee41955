#pragma once
// Read-only memory map of a whole file. Weights stay in the page cache and are shared between processes.
#include <cstddef>
#include <cstdint>
#include <string>

namespace sanctum {

class MappedFile {
 public:
  // Throws Error(io / not_found) with the path in the message.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole (small) file into a string. Throws Error naming the path.
std::string read_file(const std::string& path);

}  // namespace sanctum

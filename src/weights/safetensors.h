#pragma once
// One safetensors file, memory-mapped. The header is validated against the file: offsets in range,
// sizes matching dtype x shape, no overlaps past the end, header length not larger than the file.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "tensor/tensor.h"

namespace sanctum {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range inside the data section
};

class SafetensorsFile : public std::enable_shared_from_this<SafetensorsFile> {
 public:
  // Throws Error naming the path for: missing file, truncated file, a header that is not JSON or
  // lies about offsets, unsupported dtypes (naming the tensor).
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // A view of entry i that keeps this file mapped.
  Tensor view(size_t i) const;

 private:
  explicit SafetensorsFile(const std::string& path);
  MappedFile file_;
  const uint8_t* data_begin_ = nullptr;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace sanctum

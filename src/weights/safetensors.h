#pragma once
// One safetensors file, memory-mapped. The header is validated against the file: offsets in range,
// sizes matching dtype x shape, no overlapping tensors, header length not larger than the file.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/pinned_file.h"
#include "tensor/tensor.h"

namespace sanctum {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;   // any rank; view() refuses ranks above kMaxDims
  uint64_t begin = 0, end = 0;  // byte range inside the data section
};

// The parsed, validated header of a whole safetensors file held in bytes[0, size).
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in header order
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // 8 + header length
  uint64_t data_size = 0;    // size - data_offset
};

// Throws Error (invalid_input / unsupported) whose message starts with `what` (the file name) and
// names the tensor at fault. Never reads outside [bytes, bytes + size).
SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t size, const std::string& what = "<memory>");

// Maps a safetensors dtype string ("BF16") to ours; BOOL reads as u8. False if we cannot hold it.
bool safetensors_dtype(const std::string& name, DType* out);

class SafetensorsFile : public std::enable_shared_from_this<SafetensorsFile> {
 public:
  // Throws Error naming the path for: missing file, truncated file, a header that is not JSON or
  // lies about offsets, unsupported dtypes (naming the tensor). With `pinned`, maps that held-open
  // descriptor (the file a manifest check hashed) instead of opening path; path names it in messages.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path, const PinnedFile* pinned = nullptr);

  const std::string& path() const { return file_.path(); }
  size_t file_size() const { return file_.size(); }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // A view of entry i that keeps this file mapped.
  Tensor view(size_t i) const;
  // Entry i as a 1-D view of all its elements, whatever its rank (entries() has the shape).
  Tensor view_flat(size_t i) const;

 private:
  SafetensorsFile(const std::string& path, const PinnedFile* pinned);
  MappedFile file_;
  const uint8_t* data_begin_ = nullptr;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace sanctum

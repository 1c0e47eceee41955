#pragma once
// Read-only memory map of a whole file. Weights stay in the page cache and are shared between processes.
#include <cstddef>
#include <cstdint>
#include <string>

namespace sanctum {

class PinnedFile;

class MappedFile {
 public:
  // Throws Error(io / not_found) with the path in the message.
  explicit MappedFile(const std::string& path);
  // Maps the descriptor a check held open (the very file it read); `path` names it in messages.
  // Throws Error(invalid_input) when the file changed since it was pinned.
  MappedFile(const std::string& path, const PinnedFile& pinned);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void map(int fd, size_t size);  // throws Error(io) naming path_; the caller closes fd
  void unmap();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Drops this process's resident pages of [data, data + bytes) when the range lies inside a live
// MappedFile: whole pages of the range merged with the ranges released before (a page at either end
// that also holds bytes not released stays). The bytes do not change: a later read faults them back
// in from the file. For data that has been copied into another layout, so that the copy does not add
// to the resident set. Returns the bytes of the pages released by this call (counting again any
// released before in the merged range); 0, and nothing done, for memory that is not a mapped file
// (heap storage, say).
size_t release_mapped_pages(const void* data, size_t bytes);

// Resident bytes of every live MappedFile now (this process's pages of them, from /proc/self/smaps):
// the weights' pages it holds.
size_t mapped_resident_bytes();

// Reads a whole (small) file into a string. Throws Error naming the path.
std::string read_file(const std::string& path);

}  // namespace sanctum

#pragma once
// Files opened once and held open, so that a check and a later reader see the same file. The
// manifest gate pins every file it hashes, and the loader maps those descriptors instead of opening
// the paths again. Holding the descriptor, rather than recording identities and comparing them at a
// second open, leaves no window: whatever a path names by the time of the load, the mapping is of the
// inode that was hashed. The loader still compares each path with its pinned file, so a swap is
// refused loudly instead of being served around, and checks the file was not written in place.
#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace sanctum {

// What tells a file's bytes apart without reading them: the inode (device, number), its size and the
// modification and change times. Any write moves the change time, which a file's owner cannot set
// back (so do chmod, and unlinking the file, as a swap does).
struct FileIdentity {
  uint64_t device = 0, inode = 0, bytes = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

FileIdentity identity_of(const struct stat& st);

// True when the open descriptor fd is the file `id` describes, unchanged.
bool still_same_file(int fd, const FileIdentity& id);

class PinnedFile {
 public:
  // Opens a regular file read-only and records its identity before any byte is read. A symlink as
  // the last component is refused (callers pass resolved paths). Throws Error naming the path.
  static std::shared_ptr<const PinnedFile> open(const std::string& path);
  ~PinnedFile();
  PinnedFile(const PinnedFile&) = delete;
  PinnedFile& operator=(const PinnedFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  const FileIdentity& identity() const { return identity_; }

  // Throws Error(invalid_input) naming `shown` (the path its reader knows it by) when the file
  // changed since it was pinned: a write in place reaches the descriptor too.
  void check_unchanged(const std::string& shown) const;
  // The whole file through the descriptor (pread: its offset is left alone), checked unchanged.
  std::string read_all(const std::string& shown) const;

 private:
  PinnedFile(std::string path, int fd, const FileIdentity& identity) : path_(std::move(path)), fd_(fd), identity_(identity) {}
  std::string path_;
  int fd_ = -1;
  FileIdentity identity_;
};

// The files of one directory a manifest check pinned, by relative path as the manifest lists them.
class PinnedFiles {
 public:
  PinnedFiles() = default;
  explicit PinnedFiles(std::string manifest) : manifest_(std::move(manifest)) {}

  void add(const std::string& rel, std::shared_ptr<const PinnedFile> file) { files_[rel] = std::move(file); }
  size_t size() const { return files_.size(); }
  void clear() { files_.clear(); }

  // The pinned file `rel` of `dir`. Throws Error(invalid_input) when the check did not verify it: a
  // loader holding a pinned set reads nothing else.
  const PinnedFile& at(const std::string& dir, const std::string& rel) const;
  // Throws Error(invalid_input) naming the first file whose path in `dir` no longer leads to the
  // pinned file (replaced, removed) or which was written since it was pinned.
  void check_in_place(const std::string& dir) const;

 private:
  std::string manifest_;  // named in refusals
  std::map<std::string, std::shared_ptr<const PinnedFile>> files_;
};

}  // namespace sanctum

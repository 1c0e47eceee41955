#include "base/pinned_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace sanctum {
namespace {

int64_t nanoseconds(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

const char* kRestore =
    "; refusing to load bytes that were not verified. Restore the verified file, or regenerate and "
    "sign the manifest for the new one, then start again";

}  // namespace

FileIdentity identity_of(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size), nanoseconds(st.st_mtim),
          nanoseconds(st.st_ctim)};
}

bool still_same_file(int fd, const FileIdentity& id) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && identity_of(st) == id;
}

std::shared_ptr<const PinnedFile> PinnedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int e = errno;
    fail(e == ENOENT ? ErrorKind::not_found : ErrorKind::io, path + ": cannot open: " + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorKind::invalid_input, path + ": not a regular file");
  }
  return std::shared_ptr<const PinnedFile>(new PinnedFile(path, fd, identity_of(st)));
}

PinnedFile::~PinnedFile() { ::close(fd_); }

void PinnedFile::check_unchanged(const std::string& shown) const {
  if (still_same_file(fd_, identity_)) return;
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail(ErrorKind::io, shown + ": cannot stat: " + std::strerror(errno));
  const FileIdentity now = identity_of(st);
  const std::string what = now.bytes != identity_.bytes
                               ? std::to_string(identity_.bytes) + " bytes then, " + std::to_string(now.bytes) + " now"
                               : std::string("same size, but its modification or change time moved: written, or unlinked");
  fail(ErrorKind::invalid_input, shown + ": changed since it was verified (" + what + ")" + kRestore);
}

std::string PinnedFile::read_all(const std::string& shown) const {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::pread(fd_, buf, sizeof buf, static_cast<off_t>(out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(ErrorKind::io, shown + ": read failed: " + std::strerror(errno));
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  check_unchanged(shown);
  return out;
}

const PinnedFile& PinnedFiles::at(const std::string& dir, const std::string& rel) const {
  auto it = files_.find(rel);
  if (it != files_.end()) return *it->second;
  const std::string shown = (std::filesystem::path(dir) / rel).string();
  fail(ErrorKind::invalid_input, shown + ": the load reads this file but " + (manifest_.empty() ? "the manifest" : manifest_) +
                                     " does not list it (added after the check?). Regenerate and sign the manifest "
                                     "(sanctum manifest generate / sign), then start again");
}

void PinnedFiles::check_in_place(const std::string& dir) const {
  const std::string against = " since it was verified against " + (manifest_.empty() ? "the manifest" : manifest_);
  for (const auto& [rel, file] : files_) {
    const std::string shown = (std::filesystem::path(dir) / rel).string();
    struct stat st {};
    if (::stat(shown.c_str(), &st) != 0) fail(ErrorKind::invalid_input, shown + ": removed" + against + kRestore);
    const FileIdentity now = identity_of(st), then = file->identity();
    if (now.device != then.device || now.inode != then.inode)
      fail(ErrorKind::invalid_input, shown + ": replaced" + against + " (the path now leads to another file)" + kRestore);
    file->check_unchanged(shown);
  }
}

}  // namespace sanctum

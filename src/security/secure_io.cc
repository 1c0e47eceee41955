#include "security/secure_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "base/error.h"

namespace sanctum::security {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

void write_fully(int fd, const std::string& path, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(ErrorKind::io, path + ": write failed: " + errno_text(errno));
    done += static_cast<size_t>(n);
  }
}

// Creates `path` exclusively, writes, sets the exact mode and fsyncs. Removes the file on failure.
void create_exclusive(const std::string& path, const std::string& bytes, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    int e = errno;
    if (e == EEXIST) fail(ErrorKind::invalid_argument, path + ": already exists; refusing to overwrite (pass --force to replace it)");
    fail(e == ENOENT ? ErrorKind::not_found : ErrorKind::io, path + ": cannot create: " + errno_text(e));
  }
  try {
    if (::fchmod(fd, mode) != 0) fail(ErrorKind::io, path + ": chmod failed: " + errno_text(errno));
    write_fully(fd, path, bytes);
    if (::fsync(fd) != 0) fail(ErrorKind::io, path + ": fsync failed: " + errno_text(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(path.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(path.c_str());
    fail(ErrorKind::io, path + ": close failed: " + errno_text(e));
  }
}

std::string temp_name_beside(const std::string& path) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".tmp-%016llx", static_cast<unsigned long long>(rng()));
  return path + suffix;
}

}  // namespace

void write_file(const std::string& path, const std::string& bytes, mode_t mode, WriteMode how) {
  if (how == WriteMode::exclusive) {
    create_exclusive(path, bytes, mode);
    return;
  }
  std::string tmp = temp_name_beside(path);
  create_exclusive(tmp, bytes, mode);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail(ErrorKind::io, path + ": cannot replace: " + errno_text(e));
  }
}

namespace {

int open_for_read(const std::string& path, const char* what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    fail(e == ENOENT ? ErrorKind::not_found : ErrorKind::io, path + ": cannot open " + what + ": " + errno_text(e));
  }
  return fd;
}

// Reads fd to the end (at most max_bytes) and closes it.
std::string read_and_close(int fd, const std::string& path, size_t max_bytes) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      fail(ErrorKind::io, path + ": read failed: " + errno_text(e));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      fail(ErrorKind::invalid_input, path + ": larger than " + std::to_string(max_bytes >> 20) + " MiB; not a key, signature or manifest");
    }
  }
  ::close(fd);
  return out;
}

}  // namespace

std::string read_all(const std::string& path, size_t max_bytes) { return read_and_close(open_for_read(path, "file"), path, max_bytes); }

std::string read_private(const std::string& path) {
  // Check the permissions of the file we actually opened (fstat), not of whatever the path names later.
  int fd = open_for_read(path, "private key");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail(ErrorKind::io, path + ": cannot stat private key: " + errno_text(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorKind::invalid_input, path + ": private key is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    fail(ErrorKind::invalid_input,
         path + ": private key is accessible by group or others (mode " + mode + "); refusing to use it. Run: chmod 600 " + path);
  }
  return read_and_close(fd, path, 1 << 20);
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace sanctum::security

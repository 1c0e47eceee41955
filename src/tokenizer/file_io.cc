#include "tokenizer/file_io.h"

#include <zlib.h>

#include <sys/stat.h>

#include "base/error.h"
#include "base/mapped_file.h"

namespace sanctum {

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string read_maybe_gzip(const std::string& path) {
  if (path.size() < 3 || path.compare(path.size() - 3, 3, ".gz") != 0) return read_file(path);
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) fail(ErrorKind::not_found, path + ": cannot open");
  std::string out;
  char buf[1 << 16];
  while (true) {
    const int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int code = 0;
      const std::string message = gzerror(f, &code);
      gzclose(f);
      fail(ErrorKind::invalid_input, path + ": corrupt gzip data (" + message + ")");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  gzclose(f);
  return out;
}

}  // namespace sanctum

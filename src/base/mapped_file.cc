#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/pinned_file.h"

namespace sanctum {

namespace {
// Live mappings, so release_mapped_pages never touches memory that is not a mapped file (on anonymous
// memory MADV_DONTNEED would zero it), with the byte ranges released so far (sorted, merged): a page
// shared by two released tensors is released once both are.
struct LiveMap {
  uintptr_t base;
  size_t size;
  std::vector<std::pair<uintptr_t, uintptr_t>> released;
};
std::mutex g_maps_mutex;
std::vector<LiveMap>& live_maps() {
  static std::vector<LiveMap> maps;
  return maps;
}
}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fail(errno == ENOENT ? ErrorKind::not_found : ErrorKind::io, path + ": cannot open: " + std::strerror(errno));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(ErrorKind::io, path + ": cannot stat: " + std::strerror(errno));
  map(fd, static_cast<size_t>(st.st_size));
}

MappedFile::MappedFile(const std::string& path, const PinnedFile& pinned) : path_(path) {
  pinned.check_unchanged(path);
  map(pinned.fd(), static_cast<size_t>(pinned.identity().bytes));
  // Again after mmap, for a write in between. A write after this reaches pages not yet read, which
  // no check here can stop: the weights must not be writable by anyone the server does not trust.
  try {
    pinned.check_unchanged(path);
  } catch (...) {
    unmap();
    throw;
  }
}

void MappedFile::map(int fd, size_t size) {
  size_ = size;
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) fail(ErrorKind::io, path_ + ": cannot mmap: " + std::strerror(errno));
  data_ = static_cast<const uint8_t*>(p);
  std::lock_guard<std::mutex> lock(g_maps_mutex);
  live_maps().push_back(LiveMap{reinterpret_cast<uintptr_t>(data_), size_, {}});
}

MappedFile::~MappedFile() { unmap(); }

void MappedFile::unmap() {
  if (!data_) return;
  {
    std::lock_guard<std::mutex> lock(g_maps_mutex);
    auto& maps = live_maps();
    for (size_t i = 0; i < maps.size(); ++i)
      if (maps[i].base == reinterpret_cast<uintptr_t>(data_)) {
        maps.erase(maps.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
  }
  ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
}

size_t mapped_resident_bytes() {
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  {
    std::lock_guard<std::mutex> lock(g_maps_mutex);
    for (const LiveMap& map : live_maps()) ranges.push_back({map.base, map.base + map.size});
  }
  // This process's resident pages of each mapping (smaps' Rss), not the page cache's (mincore would
  // count pages another process or an earlier read left cached).
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  size_t resident = 0;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &begin, &end) == 2 && line.find(':') > line.find(' ')) {
      inside = std::any_of(ranges.begin(), ranges.end(), [&](const auto& r) { return begin >= r.first && end <= r.second; });
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      unsigned long long kib = 0;
      if (std::sscanf(line.c_str(), "Rss: %llu kB", &kib) == 1) resident += static_cast<size_t>(kib) * 1024;
    }
  }
  return resident;
}

size_t release_mapped_pages(const void* data, size_t bytes) {
  uintptr_t begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
  if (bytes == 0) return 0;
  std::lock_guard<std::mutex> lock(g_maps_mutex);  // held so the mapping cannot go away meanwhile
  for (LiveMap& map : live_maps()) {
    if (begin < map.base || end > map.base + map.size) continue;
    // Merge [begin, end) into the released ranges; the merged range's whole pages go.
    auto& r = map.released;
    auto it = r.begin();
    while (it != r.end() && it->second < begin) ++it;
    while (it != r.end() && it->first <= end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = r.erase(it);
    }
    r.insert(it, {begin, end});
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
    if (first >= last) return 0;
    // A read-only private mapping never written: the pages are the file's, and come back on access.
    return ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) == 0 ? last - first : 0;
  }
  return 0;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::not_found, path + ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(ErrorKind::io, path + ": read error");
  return ss.str();
}

}  // namespace sanctum

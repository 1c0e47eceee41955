#include "tensor/host_rows.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <string>

#include "base/error.h"

namespace sanctum {

namespace {

size_t page_size() {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}
size_t whole_pages(size_t bytes) { return (bytes + page_size() - 1) / page_size() * page_size(); }

// The memory file every shareable buffer maps: a sparse file of 2^62 bytes (fewer where the kernel
// refuses that size). An extent's offsets are handed out once and never reused, so a punched hole
// stays a hole; at a gigabyte of KV cache a second the offsets last over a century.
struct PageFile {
  int fd = -1;
  uint64_t size = 0;
  std::atomic<uint64_t> next{0};
  std::atomic<size_t> allocated{0};
  std::atomic<size_t> duplicate{0};

  PageFile() {
    fd = ::memfd_create("sanctum-kv-cache", MFD_CLOEXEC);
    for (int bits = 62; fd >= 0 && size == 0 && bits >= 44; bits -= 6)
      if (::ftruncate(fd, static_cast<off_t>(uint64_t{1} << bits)) == 0) size = uint64_t{1} << bits;
    if (fd >= 0 && size == 0) {
      ::close(fd);
      fd = -1;
    }
  }
};

PageFile& page_file() {
  static PageFile file;
  return file;
}

[[noreturn]] void fail_memory(const char* what, size_t bytes, int err) {
  fail(ErrorKind::io, std::string("out of memory ") + what + " " + std::to_string(bytes) + " bytes of KV cache: " + std::strerror(err) +
                          "; lower --memory-limit-mb, --kv-cache-mb or --max-seqs, or raise the commit limit (vm.overcommit_ratio)");
}

}  // namespace

// Consecutive granules of the memory file, each held by the buffers that map it; one no buffer
// holds is returned to the kernel.
struct HostRows::Extent {
  uint64_t offset = 0;
  size_t granule_bytes = 0;
  std::mutex mutex;
  std::vector<int32_t> holders;
  std::vector<uint8_t> allocated;
  size_t allocated_bytes = 0;

  Extent(int64_t granules, size_t granule_bytes_) : granule_bytes(granule_bytes_) {
    const size_t bytes = static_cast<size_t>(granules) * granule_bytes;
    offset = page_file().next.fetch_add(bytes);
    check(offset + bytes <= page_file().size, ErrorKind::io, "KV cache: the memory file's offsets are used up");
    holders.assign(static_cast<size_t>(granules), 0);
    allocated.assign(static_cast<size_t>(granules), 0);
  }
  uint64_t offset_of(int64_t index) const { return offset + static_cast<uint64_t>(index) * granule_bytes; }

  // Calls fn(first, count) for each run of granules in [index, index + n) that `pick` selects.
  template <class Pick, class Fn>
  static void runs(int64_t index, int64_t n, Pick&& pick, Fn&& fn) {
    for (int64_t i = index; i < index + n;) {
      if (!pick(i)) {
        ++i;
        continue;
      }
      int64_t end = i + 1;
      while (end < index + n && pick(end)) ++end;
      fn(i, end - i);
      i = end;
    }
  }

  // Allocates granules [index, index + n), held by one buffer (so no duplicate counted).
  void allocate(int64_t index, int64_t n) {
    std::lock_guard<std::mutex> lock(mutex);
    runs(
        index, n, [&](int64_t i) { return !allocated[static_cast<size_t>(i)]; },
        [&](int64_t first, int64_t count) {
          const size_t bytes = static_cast<size_t>(count) * granule_bytes;
          if (::fallocate(page_file().fd, 0, static_cast<off_t>(offset_of(first)), static_cast<off_t>(bytes)) != 0)
            fail_memory("allocating", bytes, errno);
          std::fill_n(allocated.begin() + first, count, 1);
          allocated_bytes += bytes;
          page_file().allocated += bytes;
        });
  }
  void hold(int64_t index, int64_t n) {
    std::lock_guard<std::mutex> lock(mutex);
    for (int64_t i = index; i < index + n; ++i)
      if (holders[static_cast<size_t>(i)]++ > 0 && allocated[static_cast<size_t>(i)]) page_file().duplicate += granule_bytes;
  }
  void release(int64_t index, int64_t n) {
    std::lock_guard<std::mutex> lock(mutex);
    for (int64_t i = index; i < index + n; ++i)
      if (--holders[static_cast<size_t>(i)] > 0 && allocated[static_cast<size_t>(i)]) page_file().duplicate -= granule_bytes;
    runs(
        index, n, [&](int64_t i) { return holders[static_cast<size_t>(i)] == 0 && allocated[static_cast<size_t>(i)]; },
        [&](int64_t first, int64_t count) {
          const size_t bytes = static_cast<size_t>(count) * granule_bytes;
          ::fallocate(page_file().fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset_of(first)),
                      static_cast<off_t>(bytes));
          std::fill_n(allocated.begin() + first, count, 0);
          allocated_bytes -= bytes;
          page_file().allocated -= bytes;
        });
  }
  int32_t holders_of(int64_t index) {
    std::lock_guard<std::mutex> lock(mutex);
    return holders[static_cast<size_t>(index)];
  }
  size_t bytes_allocated() {
    std::lock_guard<std::mutex> lock(mutex);
    return allocated_bytes;
  }
};

template <class Fn>
void HostRows::for_each_run(int64_t first, int64_t n, Fn&& fn) const {
  for (int64_t g = first; g < first + n;) {
    const Granule& head = granules_[static_cast<size_t>(g)];
    int64_t count = 1;
    while (g + count < first + n && granules_[static_cast<size_t>(g + count)].extent == head.extent &&
           granules_[static_cast<size_t>(g + count)].index == head.index + count)
      ++count;
    fn(g, count);
    g += count;
  }
}

HostRows::HostRows(void* base, size_t reserved_bytes, int64_t max_rows, size_t row_bytes, int64_t granule_rows, int fd)
    : base_(base), reserved_bytes_(reserved_bytes), max_rows_(max_rows), row_bytes_(row_bytes), granule_rows_(granule_rows), fd_(fd) {}

std::shared_ptr<HostRows> HostRows::reserve(int64_t max_rows, size_t row_bytes, bool shareable) {
  check(max_rows >= 0 && row_bytes > 0, ErrorKind::internal, "HostRows: bad row count or size");
  const int fd = shareable ? page_file().fd : -1;
  // The fewest rows filling whole pages: a snapshot's partial granule, copied, is under a page.
  const int64_t granule_rows = static_cast<int64_t>(page_size() / std::gcd(row_bytes, page_size()));
  const int64_t granules = std::max<int64_t>(1, (max_rows + granule_rows - 1) / granule_rows);
  const size_t bytes = fd >= 0 ? static_cast<size_t>(granules) * static_cast<size_t>(granule_rows) * row_bytes
                               : whole_pages(std::max<size_t>(1, static_cast<size_t>(max_rows) * row_bytes));
  // Private anonymous memory without PROT_WRITE is address space only: the kernel charges the commit
  // limit when mprotect makes it writable, so an over-commit fails there, cleanly.
  void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return std::shared_ptr<HostRows>(new HostRows(p, bytes, max_rows, row_bytes, fd >= 0 ? granule_rows : 1, fd));
}

HostRows::~HostRows() {
  ::munmap(base_, reserved_bytes_);
  if (fd_ < 0) page_file().allocated -= whole_pages(static_cast<size_t>(committed_rows_) * row_bytes_);
  for_each_run(0, static_cast<int64_t>(granules_.size()), [&](int64_t first, int64_t n) {
    granules_[static_cast<size_t>(first)].extent->release(granules_[static_cast<size_t>(first)].index, n);
  });
}

int64_t HostRows::committed_rows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return committed_rows_;
}

void HostRows::commit_private(int64_t rows) {
  const size_t from = whole_pages(static_cast<size_t>(committed_rows_) * row_bytes_);
  const size_t to = whole_pages(static_cast<size_t>(rows) * row_bytes_);
  if (to > from && ::mprotect(static_cast<char*>(base_) + from, to - from, PROT_READ | PROT_WRITE) != 0)
    fail_memory("committing", to - from, errno);
  if (to > from) page_file().allocated += to - from;
  committed_rows_ = std::max(committed_rows_, rows);
}

void HostRows::map(int64_t first, int64_t n, const std::shared_ptr<Extent>& extent, int64_t index, bool writable) {
  void* at = ::mmap(granule_address(first), static_cast<size_t>(n) * granule_bytes(), writable ? PROT_READ | PROT_WRITE : PROT_READ,
                    MAP_SHARED | MAP_FIXED, fd_, static_cast<off_t>(extent->offset_of(index)));
  if (at == MAP_FAILED) fail_memory("mapping", static_cast<size_t>(n) * granule_bytes(), errno);
  extent->hold(index, n);
  if (granules_.size() < static_cast<size_t>(first + n)) granules_.resize(static_cast<size_t>(first + n));
  for_each_run(first, n, [&](int64_t from, int64_t count) {  // the mappings it replaces
    const Granule& g = granules_[static_cast<size_t>(from)];
    if (g.extent) g.extent->release(g.index, count);
  });
  for (int64_t i = 0; i < n; ++i) granules_[static_cast<size_t>(first + i)] = {extent, index + i, writable};
}

void HostRows::commit(int64_t rows) {
  check(rows <= max_rows_, ErrorKind::internal,
        "HostRows::commit: " + std::to_string(rows) + " rows past the " + std::to_string(max_rows_) + " reserved");
  std::lock_guard<std::mutex> lock(mutex_);
  if (rows <= committed_rows_) return;
  if (fd_ < 0) return commit_private(rows);
  const int64_t need = (rows + granule_rows_ - 1) / granule_rows_;
  const int64_t mapped = static_cast<int64_t>(granules_.size());
  const int64_t most = (max_rows_ + granule_rows_ - 1) / granule_rows_;
  if (need > mapped) {  // a new extent, half again what is mapped so that growth maps few of them
    const int64_t n = std::min(most - mapped, std::max(need - mapped, mapped / 2));
    map(mapped, n, std::make_shared<Extent>(n, granule_bytes()), 0, true);
  }
  for_each_run(committed_granules_, need - committed_granules_, [&](int64_t first, int64_t n) {
    granules_[static_cast<size_t>(first)].extent->allocate(granules_[static_cast<size_t>(first)].index, n);
  });
  committed_granules_ = std::max(committed_granules_, need);
  committed_rows_ = rows;
}

void HostRows::share(const RowMemory& other, int64_t rows) {
  const auto* host = dynamic_cast<const HostRows*>(&other);
  check(host != nullptr, ErrorKind::internal, "HostRows::share: rows of another kind of memory");
  const HostRows& from = *host;
  check(from.row_bytes_ == row_bytes_ && rows <= from.max_rows_ && rows <= max_rows_, ErrorKind::internal,
        "HostRows::share: buffers of different rows");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    check(committed_rows_ == 0, ErrorKind::internal, "HostRows::share: the buffer already holds rows");
    if (fd_ >= 0 && from.fd_ >= 0 && from.granule_rows_ == granule_rows_) {
      std::lock_guard<std::mutex> from_lock(from.mutex_);
      check(rows <= from.committed_rows_, ErrorKind::internal, "HostRows::share: rows beyond what the other buffer holds");
      int64_t whole = rows / granule_rows_;
      int64_t mapped = 0;  // one mapping per run of one extent's consecutive granules
      from.for_each_run(0, whole, [&](int64_t first, int64_t n) {
        if (mapped < first) return;  // a mapping failed: the rest is copied
        const Granule& g = from.granules_[static_cast<size_t>(first)];
        try {
          map(first, n, g.extent, g.index, false);
          mapped = first + n;
        } catch (const Error&) {  // the kernel's limit on mappings
        }
      });
      whole = mapped;
      committed_granules_ = whole;
      committed_rows_ = whole * granule_rows_;
      shared_below_ = whole;
      from.shared_below_ = std::max(from.shared_below_, whole);
    }
  }
  const int64_t copied_from = committed_rows();
  commit(rows);
  if (rows > copied_from)
    std::memcpy(static_cast<char*>(base_) + static_cast<size_t>(copied_from) * row_bytes_,
                static_cast<const char*>(from.base_) + static_cast<size_t>(copied_from) * row_bytes_,
                static_cast<size_t>(rows - copied_from) * row_bytes_);
}

void HostRows::copy_out(int64_t first, int64_t n) {
  auto extent = std::make_shared<Extent>(n, granule_bytes());
  extent->allocate(0, n);
  const size_t bytes = static_cast<size_t>(n) * granule_bytes();
  for (size_t done = 0; done < bytes;) {  // the file's new pages get the rows this buffer reads now
    const ssize_t w = ::pwrite(fd_, granule_address(first) + done, bytes - done, static_cast<off_t>(extent->offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail_memory("copying", bytes - done, errno);
    done += static_cast<size_t>(w);
  }
  map(first, n, extent, 0, true);
}

void HostRows::make_writable(int64_t begin, int64_t end) {
  if (fd_ < 0 || begin >= end) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t last = std::min((end + granule_rows_ - 1) / granule_rows_, shared_below_);
  for (int64_t g = begin / granule_rows_; g < last;) {
    Granule& granule = granules_[static_cast<size_t>(g)];
    if (granule.extent->holders_of(granule.index) == 1) {  // ours alone now: write in place
      if (!granule.writable && ::mprotect(granule_address(g), granule_bytes(), PROT_READ | PROT_WRITE) != 0)
        fail_memory("unprotecting", granule_bytes(), errno);
      granule.writable = true;
      ++g;
      continue;
    }
    int64_t n = 1;  // a run of shared granules, copied out together
    while (g + n < last && granules_[static_cast<size_t>(g + n)].extent->holders_of(granules_[static_cast<size_t>(g + n)].index) > 1) ++n;
    copy_out(g, n);
    g += n;
  }
}

void HostRows::for_each_extent(const std::function<void(const void*, size_t)>& fn) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) {
    fn(this, whole_pages(static_cast<size_t>(committed_rows_) * row_bytes_));
    return;
  }
  std::vector<const Extent*> seen;  // a buffer maps few extents
  for (const Granule& g : granules_) {
    if (std::find(seen.begin(), seen.end(), g.extent.get()) != seen.end()) continue;
    seen.push_back(g.extent.get());
    fn(g.extent.get(), g.extent->bytes_allocated());
  }
}

bool HostRows::available() { return page_file().fd >= 0; }
size_t HostRows::allocated_bytes() { return page_file().allocated.load(); }
size_t HostRows::duplicate_mapped_bytes() { return page_file().duplicate.load(); }

}  // namespace sanctum

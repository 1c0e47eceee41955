#pragma once
// Host rows of a fixed size in address space reserved up front, committed a prefix at a time, whose
// pages another buffer can map at its own addresses: the CPU's KV cache storage. Growing in place
// never moves the rows or holds an old and a new copy at once, and a cache that continues a
// snapshot maps the snapshot's whole blocks instead of copying them (DESIGN decision 3's
// copy-on-write, at the granularity of pages).
//
// The pages come from one process-wide memory file (memfd): a buffer maps extents of it, and a
// buffer made by share() maps the other's pages read-only. Pages held by two buffers are never
// written in place: make_writable() gives the writer a copy of its own first. A page no buffer maps
// any more is returned to the kernel at once (a hole punched in the file). Committing allocates the
// pages (fallocate), so running out of memory fails there, cleanly, never at a page fault.
//
// Where the kernel offers no memory file, buffers are private anonymous memory and share() copies.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace sanctum {

class HostRows {
 public:
  // Address space for `max_rows` rows of `row_bytes`; null when the kernel refuses that much (e.g.
  // under a ulimit -v): the caller reserves less. `shareable` false: private memory (share() copies).
  static std::shared_ptr<HostRows> reserve(int64_t max_rows, size_t row_bytes, bool shareable = true);
  ~HostRows();
  HostRows(const HostRows&) = delete;
  HostRows& operator=(const HostRows&) = delete;

  void* data() const { return base_; }
  int64_t max_rows() const { return max_rows_; }
  size_t row_bytes() const { return row_bytes_; }
  // Rows that map pages together: pages are shared, copied and returned in these units.
  int64_t granule_rows() const { return granule_rows_; }
  bool shareable() const { return fd_ >= 0; }
  // Rows [0, rows) usable (rows <= max_rows()); rows never written read as zero. Throws Error(io)
  // naming the sizes when the kernel cannot give the memory.
  void commit(int64_t rows);
  int64_t committed_rows() const;
  // On a buffer that has committed nothing yet: rows [0, rows) hold what `from` holds there. Whole
  // granules are mapped from `from`'s pages (read-only here), the rest is copied into pages of its
  // own. Both must have the same row size. `from`'s rows [0, rows) must not change afterwards
  // unless through make_writable(), which copies shared pages out first.
  void share(const HostRows& from, int64_t rows);
  // Makes rows [begin, end) writable in place (they must be committed): pages another buffer also
  // maps are copied into pages of this one's own first. Cheap when no page in the range was ever
  // shared.
  void make_writable(int64_t begin, int64_t end);
  // Calls fn(id, bytes) for each extent of the memory file this buffer maps, bytes being what the
  // extent holds allocated now: the same id in every buffer mapping it, so that a sum over distinct
  // ids counts shared pages once. A private buffer reports itself as one extent.
  void for_each_extent(const std::function<void(const void*, size_t)>& fn) const;

  // Whether this process has the memory file (else every buffer is private).
  static bool available();
  // Across the process: bytes of pages allocated (the memory file's and private buffers' committed
  // ones), and bytes mapped by more than one buffer counted once per extra mapping (what the
  // kernel's resident set counts twice).
  static size_t allocated_bytes();
  static size_t duplicate_mapped_bytes();

 private:
  struct Extent;
  struct Granule {
    std::shared_ptr<Extent> extent;
    int64_t index = 0;      // granule within the extent
    bool writable = false;  // mapped read-write here
  };
  HostRows(void* base, size_t reserved_bytes, int64_t max_rows, size_t row_bytes, int64_t granule_rows, int fd);
  size_t granule_bytes() const { return static_cast<size_t>(granule_rows_) * row_bytes_; }
  char* granule_address(int64_t g) const { return static_cast<char*>(base_) + static_cast<size_t>(g) * granule_bytes(); }
  // Maps granules [first, first + n) of this buffer to `extent`'s granules from `index` on.
  void map(int64_t first, int64_t n, const std::shared_ptr<Extent>& extent, int64_t index, bool writable);
  // Calls fn(first, n) for each run of granules in [first, first + n) that map consecutive granules
  // of one extent (granules without a mapping form runs of their own).
  template <class Fn>
  void for_each_run(int64_t first, int64_t n, Fn&& fn) const;
  void commit_private(int64_t rows);
  void copy_out(int64_t first, int64_t n);  // a private copy of granules [first, first + n)

  void* base_;
  size_t reserved_bytes_;
  int64_t max_rows_;
  size_t row_bytes_;
  int64_t granule_rows_;
  int fd_;                          // the memory file; -1: private memory
  mutable std::mutex mutex_;        // guards the fields below (a sharer reads them from its thread)
  std::vector<Granule> granules_;   // mapped granules, [0, size)
  int64_t committed_granules_ = 0;  // of those, allocated
  int64_t committed_rows_ = 0;
  mutable int64_t shared_below_ = 0;  // granules [0, shared_below_) may be mapped by another buffer too
};

}  // namespace sanctum

#pragma once
// RowMemory (row_memory.h) on the host: the CPU's KV cache storage, shared at the granularity of
// pages.
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

#include "tensor/row_memory.h"

namespace sanctum {

class HostRows final : public RowMemory {
 public:
  // Address space for `max_rows` rows of `row_bytes`; null when the kernel refuses that much (e.g.
  // under a ulimit -v): the caller reserves less. `shareable` false: private memory (share() copies).
  static std::shared_ptr<HostRows> reserve(int64_t max_rows, size_t row_bytes, bool shareable = true);
  ~HostRows() override;
  HostRows(const HostRows&) = delete;
  HostRows& operator=(const HostRows&) = delete;

  void* data() const override { return base_; }
  int64_t max_rows() const override { return max_rows_; }
  size_t row_bytes() const override { return row_bytes_; }
  // The fewest rows filling whole pages (1 for a private buffer).
  int64_t granule_rows() const override { return granule_rows_; }
  bool shareable() const { return fd_ >= 0; }
  void commit(int64_t rows) override;
  int64_t committed_rows() const override;
  // Whole granules are mapped read-only from `from`'s pages; copies when either is private.
  void share(const RowMemory& from, int64_t rows) override;
  void make_writable(int64_t begin, int64_t end) override;
  // Per extent of the memory file this buffer maps, bytes being what the extent holds allocated
  // now. A private buffer reports itself as one extent.
  void for_each_extent(const std::function<void(const void*, size_t)>& fn) const override;

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

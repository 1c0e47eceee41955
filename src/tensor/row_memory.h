#pragma once
// Rows of a fixed size in address space reserved up front, backed a granule at a time, whose
// granules another buffer can map at its own addresses: the KV cache's storage (model/state.h).
// Growing in place never moves the rows or holds an old and a new copy at once, and a cache that
// continues a snapshot maps the snapshot's whole granules instead of copying them (DESIGN decision
// 3's copy-on-write, at the granularity of the memory's pages). A granule held by two buffers is
// never written in place: make_writable() gives the writer a copy of its own first.
//
// HostRows (host_rows.h) backs CPU caches with a memory file's pages; DeviceRows (device_rows.h)
// backs GPU caches with the driver's physical allocations.
#include <cstddef>
#include <cstdint>
#include <functional>

namespace sanctum {

class RowMemory {
 public:
  virtual ~RowMemory() = default;

  virtual void* data() const = 0;
  virtual int64_t max_rows() const = 0;
  virtual size_t row_bytes() const = 0;
  // Rows that map memory together: granules are shared, copied and returned in these units.
  virtual int64_t granule_rows() const = 0;
  // Rows [0, rows) usable (rows <= max_rows()); rows never written read as zero. Throws Error(io)
  // naming the sizes when the memory cannot be had.
  virtual void commit(int64_t rows) = 0;
  virtual int64_t committed_rows() const = 0;
  // On a buffer that has committed nothing yet: rows [0, rows) hold what `from` (of the same kind
  // and row size) holds there. Whole granules are mapped from `from`'s memory, the rest is copied
  // into memory of its own. `from`'s rows [0, rows) must not change afterwards unless through
  // make_writable(), which copies shared granules out first.
  virtual void share(const RowMemory& from, int64_t rows) = 0;
  // Makes rows [begin, end) writable in place (they must be committed): granules another buffer
  // also maps are copied into memory of this one's own first. Cheap when no granule in the range
  // was ever shared.
  virtual void make_writable(int64_t begin, int64_t end) = 0;
  // Calls fn(id, bytes) for each piece of memory this buffer maps, with the same id in every buffer
  // mapping it, so that a sum over distinct ids counts shared memory once.
  virtual void for_each_extent(const std::function<void(const void*, size_t)>& fn) const = 0;
};

}  // namespace sanctum

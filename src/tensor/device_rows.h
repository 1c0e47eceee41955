#pragma once
// RowMemory (row_memory.h) on the GPU, through the driver's virtual memory management: address
// space reserved for a cache's longest sequence, physical granules (the driver's allocation
// granularity, 2 MiB on current GPUs, in whole rows) mapped behind it as it grows. So a GPU cache
// grows without copying or moving (a recorded decode step's addresses stay valid), and a cache
// continuing a snapshot maps the snapshot's whole granules: sequences continuing one prompt-cache
// entry, or the n choices of one request, hold its prefix once, with the KV kernels still reading
// contiguous rows.
//
// Granules are reference-counted by the buffers mapping them and freed when the last one goes.
// Unmapping waits for the work queued on the process's stream before it (an event, checked later),
// so a buffer can be dropped while kernels that read it are still queued. Granules count against
// --gpu-memory-limit-mb like every other device allocation.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/row_memory.h"

namespace sanctum {

class DeviceRows final : public RowMemory {
 public:
  // Rows per granule for rows of `row_bytes`; 0 where the GPU offers no virtual memory management,
  // CUDA is not built in, or a granule would hold more than kMaxGranuleRows rows (the memory a short
  // sequence would leave unused: such rows keep storage that grows by copying).
  static int64_t granule_rows_for(size_t row_bytes);
  static constexpr int64_t kMaxGranuleRows = 2048;
  // Address space for `max_rows` rows; null where granule_rows_for is 0 or the driver refuses the
  // address space (the caller uses plain device memory).
  static std::shared_ptr<DeviceRows> reserve(int64_t max_rows, size_t row_bytes);
  ~DeviceRows() override;
  DeviceRows(const DeviceRows&) = delete;
  DeviceRows& operator=(const DeviceRows&) = delete;

  void* data() const override;
  int64_t max_rows() const override { return max_rows_; }
  size_t row_bytes() const override { return row_bytes_; }
  int64_t granule_rows() const override { return granule_rows_; }
  void commit(int64_t rows) override;
  int64_t committed_rows() const override;
  void share(const RowMemory& from, int64_t rows) override;
  // A shared granule in the range is copied after the stream's queued work (which may read it)
  // finishes: rare, since writes go past the rows a snapshot shares.
  void make_writable(int64_t begin, int64_t end) override;
  // Per granule: its bytes, its identity the same in every buffer mapping it.
  void for_each_extent(const std::function<void(const void*, size_t)>& fn) const override;

  // Across the process: bytes of granules allocated, and bytes mapped by more than one buffer
  // counted once per extra mapping (what copying would have added).
  static size_t allocated_bytes();
  static size_t duplicate_mapped_bytes();

  struct Granule;  // one physical allocation (device_rows.cu)

 private:
  DeviceRows(uintptr_t base, size_t reserved_bytes, int64_t max_rows, size_t row_bytes, int64_t granule_rows);
  size_t granule_bytes() const { return static_cast<size_t>(granule_rows_) * row_bytes_; }
  uintptr_t granule_address(int64_t g) const { return base_ + static_cast<size_t>(g) * granule_bytes(); }
  // Maps `granule` at granule index g of this buffer (replacing what is mapped there).
  void map(int64_t g, std::shared_ptr<Granule> granule);

  uintptr_t base_;
  size_t reserved_bytes_;
  int64_t max_rows_;
  size_t row_bytes_;
  int64_t granule_rows_;
  mutable std::mutex mutex_;                        // guards the fields below (a sharer reads them from its thread)
  std::vector<std::shared_ptr<Granule>> granules_;  // mapped, [0, size)
  int64_t committed_rows_ = 0;
};

}  // namespace sanctum

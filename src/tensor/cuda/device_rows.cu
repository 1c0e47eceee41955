// DeviceRows over the driver's virtual memory management. The driver's entry points are looked up
// through the runtime (cudaGetDriverEntryPointByVersion), so the binary does not link libcuda and
// still starts where no driver is installed.
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <list>
#include <numeric>
#include <string>
#include <type_traits>

#include "base/error.h"
#include "tensor/cuda/stream.h"
#include "tensor/device_memory.h"
#include "tensor/device_rows.h"
#include "tensor/step_graph.h"

namespace sanctum {

namespace {

struct Driver {
  decltype(&cuDeviceGetAttribute) attribute = nullptr;
  decltype(&cuMemGetAllocationGranularity) granularity_of = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemAddressReserve) address_reserve = nullptr;
  decltype(&cuMemAddressFree) address_free = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  int device = 0;
  size_t granularity = 0;  // 0: no virtual memory management here
  CUmemAllocationProp prop{};
  CUmemAccessDesc access{};
};

template <class Fn>
bool load(const char* name, Fn& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess || found != cudaDriverEntryPointSuccess ||
      p == nullptr) {
    (void)cudaGetLastError();
    return false;
  }
  fn = reinterpret_cast<Fn>(p);
  return true;
}

const Driver& driver() {
  static const Driver d = [] {
    Driver d;
    if (!device_memory::cuda_available()) return d;
    const bool loaded = load("cuDeviceGetAttribute", d.attribute) && load("cuMemGetAllocationGranularity", d.granularity_of) &&
                        load("cuMemCreate", d.create) && load("cuMemRelease", d.release) &&
                        load("cuMemAddressReserve", d.address_reserve) && load("cuMemAddressFree", d.address_free) &&
                        load("cuMemMap", d.map) && load("cuMemUnmap", d.unmap) && load("cuMemSetAccess", d.set_access);
    if (!loaded || cudaGetDevice(&d.device) != cudaSuccess) return d;
    cuda::stream();  // the runtime's context is current from here on, as the driver calls need
    int supported = 0;
    if (d.attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d.device) != CUDA_SUCCESS || !supported) return d;
    d.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    d.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.prop.location.id = d.device;
    d.access.location = d.prop.location;
    d.access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t granularity = 0;
    if (d.granularity_of(&granularity, &d.prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS) d.granularity = granularity;
    return d;
  }();
  return d;
}

std::string driver_error(CUresult status) { return "CUDA driver error " + std::to_string(static_cast<int>(status)); }

void check_driver(CUresult status, const char* what) {
  if (status != CUDA_SUCCESS) fail(ErrorKind::internal, std::string("[") + what + "] " + driver_error(status));
}

std::atomic<size_t> g_allocated{0}, g_duplicate{0};

}  // namespace

// One physical allocation of a granule's bytes, counted against the GPU memory limit; `holders`
// buffers map it.
struct DeviceRows::Granule {
  CUmemGenericAllocationHandle handle = 0;
  size_t bytes = 0;
  std::atomic<int> holders{0};

  explicit Granule(size_t bytes_) : bytes(bytes_) {
    device_memory::cuda_charge(bytes);
    CUresult status = driver().create(&handle, bytes, &driver().prop, 0);
    if (status == CUDA_ERROR_OUT_OF_MEMORY) {  // retired buffers may still hold granules: let them go first
      device_memory::cuda_synchronize();
      retire_finished();
      status = driver().create(&handle, bytes, &driver().prop, 0);
    }
    if (status != CUDA_SUCCESS) {
      device_memory::cuda_uncharge(bytes);
      fail(ErrorKind::io, "out of GPU memory allocating " + std::to_string(bytes >> 20) + " MiB of KV cache: " + driver_error(status) +
                              "; lower --kv-cache-mb or --max-seqs");
    }
    g_allocated += bytes;
  }
  ~Granule() {
    driver().release(handle);
    device_memory::cuda_uncharge(bytes);
    g_allocated -= bytes;
  }
  void hold() {
    if (holders.fetch_add(1) > 0) g_duplicate += bytes;
  }
  void drop() {
    if (holders.fetch_sub(1) > 1) g_duplicate -= bytes;
  }

  // Buffers dropped while work queued before their drop may still read them: their address space
  // is unmapped and freed once the stream passes `done`.
  struct Retired {
    uintptr_t base = 0;
    size_t reserved_bytes = 0, granule_bytes = 0;
    std::vector<std::shared_ptr<Granule>> granules;
    cudaEvent_t done = nullptr;
  };
  // Both outlive static destructors that drop buffers.
  static std::mutex& retired_mutex() {
    static auto* m = new std::mutex;
    return *m;
  }
  static std::list<Retired>& retired() {
    static auto* list = new std::list<Retired>;
    return *list;
  }
  static void retire_finished() {
    std::lock_guard<std::mutex> lock(retired_mutex());
    for (auto it = retired().begin(); it != retired().end();) {
      if (it->done != nullptr && cudaEventQuery(it->done) != cudaSuccess) {
        (void)cudaGetLastError();
        ++it;
        continue;
      }
      for (size_t g = 0; g < it->granules.size(); ++g)
        if (it->granules[g]) driver().unmap(it->base + g * it->granule_bytes, it->granule_bytes);
      driver().address_free(it->base, it->reserved_bytes);
      if (it->done != nullptr) cudaEventDestroy(it->done);
      it = retired().erase(it);  // the last holder of a granule releases it
    }
  }
};

int64_t DeviceRows::granule_rows_for(size_t row_bytes) {
  const size_t granularity = driver().granularity;
  if (granularity == 0 || row_bytes == 0) return 0;
  const auto rows = static_cast<int64_t>(granularity / std::gcd(row_bytes, granularity));
  return rows <= kMaxGranuleRows ? rows : 0;
}

std::shared_ptr<DeviceRows> DeviceRows::reserve(int64_t max_rows, size_t row_bytes) {
  check(max_rows >= 0, ErrorKind::internal, "DeviceRows: bad row count");
  const int64_t granule_rows = granule_rows_for(row_bytes);
  if (granule_rows == 0) return nullptr;
  Granule::retire_finished();
  const int64_t granules = std::max<int64_t>(1, (max_rows + granule_rows - 1) / granule_rows);
  const size_t bytes = static_cast<size_t>(granules) * static_cast<size_t>(granule_rows) * row_bytes;
  CUdeviceptr base = 0;
  if (driver().address_reserve(&base, bytes, driver().granularity, 0, 0) != CUDA_SUCCESS) return nullptr;
  return std::shared_ptr<DeviceRows>(new DeviceRows(base, bytes, max_rows, row_bytes, granule_rows));
}

DeviceRows::DeviceRows(uintptr_t base, size_t reserved_bytes, int64_t max_rows, size_t row_bytes, int64_t granule_rows)
    : base_(base), reserved_bytes_(reserved_bytes), max_rows_(max_rows), row_bytes_(row_bytes), granule_rows_(granule_rows) {}

DeviceRows::~DeviceRows() {
  Granule::Retired r{base_, reserved_bytes_, granule_bytes(), std::move(granules_), nullptr};
  for (const auto& g : r.granules)
    if (g) g->drop();  // the stream orders any later writer after the work that still reads here
  if (cudaEventCreateWithFlags(&r.done, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventRecord(r.done, cuda::stream()) != cudaSuccess) {  // no event to wait for: wait now, unmap below
    (void)cudaGetLastError();
    if (r.done) cudaEventDestroy(r.done);
    r.done = nullptr;
    cudaStreamSynchronize(cuda::stream());
    (void)cudaGetLastError();
  }
  {
    std::lock_guard<std::mutex> lock(Granule::retired_mutex());
    Granule::retired().push_back(std::move(r));
  }
  Granule::retire_finished();
}

void* DeviceRows::data() const { return reinterpret_cast<void*>(base_); }

int64_t DeviceRows::committed_rows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return committed_rows_;
}

void DeviceRows::map(int64_t g, std::shared_ptr<Granule> granule) {
  const uintptr_t at = granule_address(g);
  check_driver(driver().map(at, granule_bytes(), 0, granule->handle, 0), "map KV granule");
  check_driver(driver().set_access(at, granule_bytes(), &driver().access, 1), "KV granule access");
  granule->hold();
  if (granules_.size() <= static_cast<size_t>(g)) granules_.resize(static_cast<size_t>(g) + 1);
  granules_[static_cast<size_t>(g)] = std::move(granule);
}

void DeviceRows::commit(int64_t rows) {
  check(rows <= max_rows_, ErrorKind::internal,
        "DeviceRows::commit: " + std::to_string(rows) + " rows past the " + std::to_string(max_rows_) + " reserved");
  check(!StepGraph::recording_now(), ErrorKind::internal, "KV cache growth while recording a step graph");
  std::lock_guard<std::mutex> lock(mutex_);
  if (rows <= committed_rows_) return;
  Granule::retire_finished();
  const auto need = static_cast<int64_t>((rows + granule_rows_ - 1) / granule_rows_);
  for (auto g = static_cast<int64_t>(granules_.size()); g < need; ++g) {
    map(g, std::make_shared<Granule>(granule_bytes()));
    // Read as zero, like every other device allocation (each as mapped: a later one may fail).
    cuda::check_cuda(cudaMemsetAsync(reinterpret_cast<void*>(granule_address(g)), 0, granule_bytes(), cuda::stream()), "zero KV granule");
  }
  committed_rows_ = rows;
}

void DeviceRows::share(const RowMemory& other, int64_t rows) {
  const auto* device = dynamic_cast<const DeviceRows*>(&other);
  check(device != nullptr && device->row_bytes_ == row_bytes_ && device->granule_rows_ == granule_rows_ && rows <= max_rows_,
        ErrorKind::internal, "DeviceRows::share: buffers of different rows");
  const DeviceRows& from = *device;
  int64_t whole = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    check(committed_rows_ == 0, ErrorKind::internal, "DeviceRows::share: the buffer already holds rows");
    std::lock_guard<std::mutex> from_lock(from.mutex_);
    check(rows <= from.committed_rows_, ErrorKind::internal, "DeviceRows::share: rows beyond what the other buffer holds");
    whole = rows / granule_rows_;
    for (int64_t g = 0; g < whole; ++g) map(g, from.granules_[static_cast<size_t>(g)]);
    committed_rows_ = whole * granule_rows_;
  }
  commit(rows);
  const size_t copied = static_cast<size_t>(whole * granule_rows_) * row_bytes_;
  if (rows > whole * granule_rows_)
    device_memory::cuda_copy(reinterpret_cast<char*>(base_) + copied, reinterpret_cast<const char*>(from.base_) + copied,
                             static_cast<size_t>(rows) * row_bytes_ - copied, device_memory::CopyKind::device_to_device);
}

void DeviceRows::make_writable(int64_t begin, int64_t end) {
  if (begin >= end) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t last = std::min<int64_t>((end + granule_rows_ - 1) / granule_rows_, static_cast<int64_t>(granules_.size()));
  for (int64_t g = begin / granule_rows_; g < last; ++g) {
    std::shared_ptr<Granule>& granule = granules_[static_cast<size_t>(g)];
    if (granule->holders.load() <= 1) continue;  // ours alone: write in place
    // A granule of our own, filled through a second mapping of it; then our addresses are moved
    // over to it once no queued work reads them any more.
    auto own = std::make_shared<Granule>(granule_bytes());
    CUdeviceptr scratch = 0;
    check_driver(driver().address_reserve(&scratch, granule_bytes(), driver().granularity, 0, 0), "reserve KV copy");
    check_driver(driver().map(scratch, granule_bytes(), 0, own->handle, 0), "map KV copy");
    check_driver(driver().set_access(scratch, granule_bytes(), &driver().access, 1), "KV copy access");
    device_memory::cuda_copy(reinterpret_cast<void*>(scratch), reinterpret_cast<const void*>(granule_address(g)), granule_bytes(),
                             device_memory::CopyKind::device_to_device);
    device_memory::cuda_synchronize();
    driver().unmap(scratch, granule_bytes());
    driver().address_free(scratch, granule_bytes());
    check_driver(driver().unmap(granule_address(g), granule_bytes()), "unmap shared KV granule");
    granule->drop();
    granule.reset();
    map(g, std::move(own));
  }
}

void DeviceRows::for_each_extent(const std::function<void(const void*, size_t)>& fn) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& g : granules_)
    if (g) fn(g.get(), g->bytes);
}

size_t DeviceRows::allocated_bytes() { return g_allocated.load(); }
size_t DeviceRows::duplicate_mapped_bytes() { return g_duplicate.load(); }

}  // namespace sanctum

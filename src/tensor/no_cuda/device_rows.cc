// Stand-ins for a build without the CUDA backend: no GPU rows exist, so callers use host memory.
#include "tensor/device_rows.h"

#include "base/error.h"

namespace sanctum {

struct DeviceRows::Granule {};

int64_t DeviceRows::granule_rows_for(size_t) { return 0; }
std::shared_ptr<DeviceRows> DeviceRows::reserve(int64_t, size_t) { return nullptr; }
DeviceRows::~DeviceRows() = default;
void* DeviceRows::data() const { return nullptr; }
void DeviceRows::commit(int64_t) { fail(ErrorKind::unsupported, "this sanctum was built without CUDA"); }
int64_t DeviceRows::committed_rows() const { return 0; }
void DeviceRows::share(const RowMemory&, int64_t) { fail(ErrorKind::unsupported, "this sanctum was built without CUDA"); }
void DeviceRows::make_writable(int64_t, int64_t) {}
void DeviceRows::for_each_extent(const std::function<void(const void*, size_t)>&) const {}
size_t DeviceRows::allocated_bytes() { return 0; }
size_t DeviceRows::duplicate_mapped_bytes() { return 0; }

}  // namespace sanctum

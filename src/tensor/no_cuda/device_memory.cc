// Stand-ins for a build without the CUDA backend: every entry point says so.
#include "tensor/device_memory.h"

#include "base/error.h"

namespace sanctum::device_memory {

namespace {
[[noreturn]] void no_cuda() {
  fail(ErrorKind::unsupported, "this sanctum was built without CUDA (configure with -DSANCTUM_CUDA=ON where nvcc is installed)");
}
}  // namespace

bool cuda_available() { return false; }
std::string cuda_unavailable_reason() { return "built without CUDA"; }
std::shared_ptr<void> cuda_allocate(size_t) { no_cuda(); }
void cuda_copy(void*, const void*, size_t, CopyKind) { no_cuda(); }
void cuda_copy_2d(void*, size_t, const void*, size_t, size_t, size_t, CopyKind) { no_cuda(); }
uint64_t queue_copy_to_host(const void*, size_t) {
  no_cuda();
  return 0;
}
void collect_copy(uint64_t, void*, size_t) { no_cuda(); }
void cuda_upload(void*, const void*, size_t) { no_cuda(); }
void cuda_synchronize() {}
double cuda_copy_bandwidth() { no_cuda(); }
void set_cuda_memory_limit(size_t) {}
void cuda_charge(size_t) { no_cuda(); }
void cuda_uncharge(size_t) {}
size_t cuda_memory_in_use() { return 0; }
uint64_t cuda_allocations() { return 0; }
size_t cuda_memory_peak() { return 0; }

}  // namespace sanctum::device_memory

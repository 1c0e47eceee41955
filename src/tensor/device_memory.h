#pragma once
// Memory on the GPU, for Tensor. The CUDA build implements this in tensor/cuda/; a build without
// CUDA links the stand-ins in tensor/no_cuda/, which report that CUDA is not built in. All device
// work of the process is ordered on one stream (cuda_stream()), so copies and kernels never race.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sanctum::device_memory {

// True when the binary has the CUDA backend and a usable GPU is present.
bool cuda_available();
// Why cuda_available() is false ("built without CUDA", "no CUDA device: ..."), or "".
std::string cuda_unavailable_reason();

// Zero-filled device memory, freed when the last owner goes. Throws Error(io) when the device is out
// of memory (naming the size and the limit) and Error(unsupported) without CUDA.
std::shared_ptr<void> cuda_allocate(size_t bytes);

enum class CopyKind { host_to_device, device_to_host, device_to_device };
// Ordered on the stream; a device_to_host copy returns once the bytes are on the host.
void cuda_copy(void* dst, const void* src, size_t bytes, CopyKind kind);
// Copies `rows` rows of `row_bytes` bytes between pitched buffers (strided tensors).
void cuda_copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes, size_t rows, CopyKind kind);
// Host to device through pinned staging buffers (the host side may be a memory-mapped file): the
// disk read of one chunk overlaps the transfer of the previous one.
void cuda_upload(void* dst, const void* src, size_t bytes);
// Small device-to-host copies queued without waiting, for results the host reads a step later (a
// decode step's token while the next step runs): queue_copy_to_host returns a ticket, and
// collect_copy waits for that copy alone and hands its bytes over. Where the GPU maps the pinned
// ring, a kernel on the compute stream writes the bytes there (no copy-engine hand-over in the
// stream's order of work). Up to kPendingCopies copies of
// up to kPendingCopyBytes each may be outstanding; a ticket not collected by then is dropped (its
// slot waits for its copy before taking the next), and collecting it throws.
inline constexpr int kPendingCopies = 8;
inline constexpr size_t kPendingCopyBytes = 64;
uint64_t queue_copy_to_host(const void* src, size_t bytes);
void collect_copy(uint64_t ticket, void* dst, size_t bytes);
// Waits for all queued device work.
void cuda_synchronize();

// Device-to-device copy bandwidth in bytes per second, counting bytes read plus bytes written (the
// convention of the bandwidth floor: weight bytes per token over this). Best of several 2 GiB copies.
double cuda_copy_bandwidth();

// Caps device memory taken through cuda_allocate and cuda_charge (0: no cap); allocations past it
// throw.
void set_cuda_memory_limit(size_t bytes);
// Counts `bytes` the caller allocates itself (the KV cache's granules, tensor/device_rows.h) in the
// memory in use; throws Error(io) as cuda_allocate does when that passes the cap. cuda_uncharge
// gives them back.
void cuda_charge(size_t bytes);
void cuda_uncharge(size_t bytes);
size_t cuda_memory_in_use();
// Counts cuda_allocate calls: work recorded against device addresses (a step graph) is stale once
// this moved, since any scratch buffer it used may have been replaced.
uint64_t cuda_allocations();
size_t cuda_memory_peak();

}  // namespace sanctum::device_memory

// Device memory through the stream-ordered allocator (cudaMallocAsync): freeing returns memory to a
// pool without a device-wide synchronisation, so snapshots and workspace growth stay cheap.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "base/error.h"
#include "base/tuning.h"
#include "tensor/cuda/stream.h"
#include "tensor/device_memory.h"
#include "tensor/step_graph.h"

namespace sanctum::cuda {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    fail(ErrorKind::internal, std::string("[") + what + "] CUDA error: " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

cudaStream_t stream() {
  static cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking), "stream create");
    // Keep freed blocks in the pool instead of handing them back to the driver at every sync.
    cudaMemPool_t pool = nullptr;
    int device = 0;
    check_cuda(cudaGetDevice(&device), "get device");
    check_cuda(cudaDeviceGetDefaultMemPool(&pool, device), "default mem pool");
    uint64_t keep = UINT64_MAX;
    check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "mem pool threshold");
    return created;
  }();
  return s;
}

}  // namespace sanctum::cuda

namespace sanctum::device_memory {

namespace {
std::atomic<size_t> g_limit{0}, g_in_use{0}, g_peak{0};
std::atomic<uint64_t> g_allocations{0};

cudaMemcpyKind to_cuda(CopyKind kind) {
  switch (kind) {
    case CopyKind::host_to_device: return cudaMemcpyHostToDevice;
    case CopyKind::device_to_host: return cudaMemcpyDeviceToHost;
    case CopyKind::device_to_device: return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}
}  // namespace

std::string cuda_unavailable_reason() {
  static const std::string reason = [] {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(status);
    if (count == 0) return std::string("no CUDA device");
    return std::string();
  }();
  return reason;
}

bool cuda_available() { return cuda_unavailable_reason().empty(); }

void cuda_charge(size_t bytes) {
  const size_t limit = g_limit.load();
  const size_t now = g_in_use.fetch_add(bytes) + bytes;
  if (limit != 0 && now > limit) {
    g_in_use.fetch_sub(bytes);
    fail(ErrorKind::io, "GPU memory limit reached: allocating " + std::to_string(bytes >> 20) + " MiB would exceed --gpu-memory-limit-mb " +
                            std::to_string(limit >> 20));
  }
  size_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

void cuda_uncharge(size_t bytes) { g_in_use.fetch_sub(bytes); }

std::shared_ptr<void> cuda_allocate(size_t bytes) {
  check(cuda_available(), ErrorKind::unsupported, "cannot allocate on cuda: " + cuda_unavailable_reason());
  // Memory allocated inside a recording would belong to the graph, not to the tensor that holds it.
  check(!StepGraph::recording_now(), ErrorKind::internal,
        "device allocation of " + std::to_string(bytes) + " bytes while recording a step graph");
  g_allocations.fetch_add(1);
  const size_t rounded = (bytes + 255) / 256 * 256 + 256;  // never zero; room for 16-byte vector tails
  cuda_charge(rounded);
  void* p = nullptr;
  cudaError_t status = cudaMallocAsync(&p, rounded, cuda::stream());
  if (status != cudaSuccess) {
    g_in_use.fetch_sub(rounded);
    cudaGetLastError();
    fail(ErrorKind::io, "out of GPU memory allocating " + std::to_string(bytes >> 20) + " MiB: " + cudaGetErrorString(status));
  }
  cuda::check_cuda(cudaMemsetAsync(p, 0, rounded, cuda::stream()), "memset");
  return std::shared_ptr<void>(p, [rounded](void* q) {
    cudaFreeAsync(q, cuda::stream());
    g_in_use.fetch_sub(rounded);
  });
}

void cuda_copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  cuda::check_cuda(cudaMemcpyAsync(dst, src, bytes, to_cuda(kind), cuda::stream()), "copy");
  if (kind == CopyKind::device_to_host) cuda::check_cuda(cudaStreamSynchronize(cuda::stream()), "copy to host");
}

namespace {
// The pinned ring behind queue_copy_to_host: slot ticket % kPendingCopies, with the event that marks
// its copy done and the ticket it holds. device_slots: the same memory as the GPU addresses it, or
// null where it cannot (then the copy engine moves the bytes).
struct PendingCopies {
  std::mutex mutex;
  char* slots = nullptr;
  char* device_slots = nullptr;
  cudaEvent_t done[kPendingCopies] = {};
  uint64_t holds[kPendingCopies] = {};
  uint64_t next = 1;
};
PendingCopies& pending_copies() {
  static PendingCopies* p = [] {
    auto* q = new PendingCopies;  // lives as long as the process: its events outlast static destructors
    cuda::check_cuda(cudaMallocHost(reinterpret_cast<void**>(&q->slots), kPendingCopies * kPendingCopyBytes), "pinned copy slots");
    for (auto& e : q->done) cuda::check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "copy event");
    if (cudaHostGetDevicePointer(reinterpret_cast<void**>(&q->device_slots), q->slots, 0) != cudaSuccess) {
      q->device_slots = nullptr;
      (void)cudaGetLastError();  // not mapped: clear the error, keep the copy engine
    }
    return q;
  }();
  return *p;
}

// A few bytes written by the GPU straight into pinned host memory. In a decode step's queue this
// replaces a copy-engine transfer, whose hand-overs from and back to the compute stream left the GPU
// idle for about 10 us per token on an H200 (bench/RESULTS.md).
__global__ void write_to_host_kernel(char* dst, const char* src, int bytes) {
  if (static_cast<int>(threadIdx.x) < bytes) dst[threadIdx.x] = src[threadIdx.x];
  __threadfence_system();
}
}  // namespace

uint64_t queue_copy_to_host(const void* src, size_t bytes) {
  check(bytes <= kPendingCopyBytes, ErrorKind::internal, "queue_copy_to_host: at most 64 bytes per copy");
  PendingCopies& p = pending_copies();
  std::lock_guard<std::mutex> lock(p.mutex);
  const uint64_t ticket = p.next++;
  const int slot = static_cast<int>(ticket % kPendingCopies);
  if (p.holds[slot] != 0) cuda::check_cuda(cudaEventSynchronize(p.done[slot]), "copy slot wait");  // its earlier copy still lands there
  if (p.device_slots != nullptr && current_tuning().on(Knob::host_copy_kernel)) {                  // off: the copy engine, for comparisons
    write_to_host_kernel<<<1, kPendingCopyBytes, 0, cuda::stream()>>>(p.device_slots + slot * kPendingCopyBytes,
                                                                      static_cast<const char*>(src), static_cast<int>(bytes));
    cuda::check_cuda(cudaGetLastError(), "queued copy");
  } else {
    cuda::check_cuda(cudaMemcpyAsync(p.slots + slot * kPendingCopyBytes, src, bytes, cudaMemcpyDeviceToHost, cuda::stream()),
                     "queued copy");
  }
  cuda::check_cuda(cudaEventRecord(p.done[slot], cuda::stream()), "queued copy record");
  p.holds[slot] = ticket;
  return ticket;
}

void collect_copy(uint64_t ticket, void* dst, size_t bytes) {
  check(bytes <= kPendingCopyBytes, ErrorKind::internal, "collect_copy: at most 64 bytes per copy");
  PendingCopies& p = pending_copies();
  std::lock_guard<std::mutex> lock(p.mutex);
  const int slot = static_cast<int>(ticket % kPendingCopies);
  check(ticket != 0 && p.holds[slot] == ticket, ErrorKind::internal, "collect_copy: the copy was dropped or already collected");
  cuda::check_cuda(cudaEventSynchronize(p.done[slot]), "queued copy wait");
  std::memcpy(dst, p.slots + slot * kPendingCopyBytes, bytes);
  p.holds[slot] = 0;
}

void cuda_copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes, size_t rows, CopyKind kind) {
  if (rows == 0 || row_bytes == 0) return;
  cuda::check_cuda(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, to_cuda(kind), cuda::stream()), "copy 2d");
  if (kind == CopyKind::device_to_host) cuda::check_cuda(cudaStreamSynchronize(cuda::stream()), "copy to host");
}

void cuda_upload(void* dst, const void* src, size_t bytes) {
  constexpr size_t kChunk = size_t{32} << 20;
  struct Staging {
    void* buffer[2] = {nullptr, nullptr};
    cudaEvent_t done[2] = {nullptr, nullptr};
  };
  static Staging staging = [] {
    Staging s;
    for (int i = 0; i < 2; ++i) {
      cuda::check_cuda(cudaMallocHost(&s.buffer[i], kChunk), "pinned staging");
      cuda::check_cuda(cudaEventCreateWithFlags(&s.done[i], cudaEventDisableTiming), "staging event");
    }
    return s;
  }();
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  for (size_t off = 0, i = 0; off < bytes; off += kChunk, i ^= 1) {
    const size_t n = std::min(kChunk, bytes - off);
    cuda::check_cuda(cudaEventSynchronize(staging.done[i]), "staging wait");
    std::memcpy(staging.buffer[i], static_cast<const char*>(src) + off, n);
    cuda::check_cuda(cudaMemcpyAsync(static_cast<char*>(dst) + off, staging.buffer[i], n, cudaMemcpyHostToDevice, cuda::stream()),
                     "upload");
    cuda::check_cuda(cudaEventRecord(staging.done[i], cuda::stream()), "staging record");
  }
  // The staging buffers are reused by the next call only after their events complete.
}

void cuda_synchronize() { cuda::check_cuda(cudaStreamSynchronize(cuda::stream()), "synchronize"); }

double cuda_copy_bandwidth() {
  const size_t bytes = size_t{1} << 31;
  auto src = cuda_allocate(bytes), dst = cuda_allocate(bytes);
  cudaEvent_t start = nullptr, stop = nullptr;
  cuda::check_cuda(cudaEventCreate(&start), "event");
  cuda::check_cuda(cudaEventCreate(&stop), "event");
  float best_ms = 1e30f;
  for (int pass = 0; pass < 6; ++pass) {
    cuda::check_cuda(cudaEventRecord(start, cuda::stream()), "event record");
    cuda::check_cuda(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, cuda::stream()), "copy");
    cuda::check_cuda(cudaEventRecord(stop, cuda::stream()), "event record");
    cuda::check_cuda(cudaEventSynchronize(stop), "event sync");
    float ms = 0.0f;
    cuda::check_cuda(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    if (pass > 0) best_ms = std::min(best_ms, ms);  // the first pass warms the clocks
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 2.0 * static_cast<double>(bytes) / (static_cast<double>(best_ms) / 1e3);
}

void set_cuda_memory_limit(size_t bytes) { g_limit = bytes; }
size_t cuda_memory_in_use() { return g_in_use.load(); }
uint64_t cuda_allocations() { return g_allocations.load(); }
size_t cuda_memory_peak() { return g_peak.load(); }

}  // namespace sanctum::device_memory

// Every kernel's start and end on the GPU, as the GPU ran them: a CUPTI activity trace that CUDA
// loads into any program through CUDA_INJECTION64_PATH. Kernels replayed from CUDA graphs are
// recorded too, which Nsight Compute cannot show: it runs kernels one at a time, so it hides what
// a decode step really pays between and across its launches (programmatic dependent launch lets a
// kernel start before the one ahead ends).
//
//   CUDA_INJECTION64_PATH=libsanctum_kernel_trace.so SANCTUM_KERNEL_TRACE=trace.csv sanctum bench ...
//
// Writes one CSV line per kernel: start and end (ns, GPU clock), graph id (0 outside graphs), the
// correlation id of the launch (one per graph launch), grid, block and the demangled name. Copies
// ("memcpy HtoD 8 B") and CUDA runtime calls on the host ("api cudaGraphLaunch") get lines of their
// own, with grid and block "-", on the same clock: they show what a decode step waits for between
// two replays. bench/gpu/trace_decode.py reads it.
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

std::FILE* out = nullptr;
std::mutex out_mutex;
constexpr size_t kBufferBytes = size_t{16} << 20;

void report(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  std::fprintf(stderr, "kernel trace: %s: %s\n", what, text ? text : "unknown error");
}

std::string demangled(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : name;
  std::free(d);
  for (char& c : s)
    if (c == ',' || c == '\n') c = ';';  // one CSV field
  return s;
}

const char* copy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    default: return "other";
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(out_mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (!out) continue;
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      std::fprintf(out, "%llu,%llu,%u,%u,%d.%d.%d,%d,%s\n", static_cast<unsigned long long>(k->start),
                   static_cast<unsigned long long>(k->end), k->graphId, k->correlationId, k->gridX, k->gridY, k->gridZ, k->blockX,
                   demangled(k->name).c_str());
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      std::fprintf(out, "%llu,%llu,%u,%u,-,-,memcpy %s %llu B\n", static_cast<unsigned long long>(m->start),
                   static_cast<unsigned long long>(m->end), m->graphId, m->correlationId, copy_kind(m->copyKind),
                   static_cast<unsigned long long>(m->bytes));
    } else if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const char* name = nullptr;
      if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name) != CUPTI_SUCCESS || !name) name = "unknown";
      std::fprintf(out, "%llu,%llu,0,%u,-,-,api %s\n", static_cast<unsigned long long>(a->start), static_cast<unsigned long long>(a->end),
                   a->correlationId, name);
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (dropped) std::fprintf(stderr, "kernel trace: %zu records dropped\n", dropped);
  std::free(buffer);
}

void finish() {
  report(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
  std::lock_guard<std::mutex> lock(out_mutex);
  if (out) std::fclose(out), out = nullptr;
}

}  // namespace

// Called by CUDA when it initializes, in a program started with CUDA_INJECTION64_PATH naming this library.
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  const char* path = std::getenv("SANCTUM_KERNEL_TRACE");
  out = std::fopen(path && *path ? path : "kernel_trace.csv", "w");
  if (!out) {
    std::fprintf(stderr, "kernel trace: cannot write %s\n", path ? path : "kernel_trace.csv");
    return 0;
  }
  std::fprintf(out, "start_ns,end_ns,graph,correlation,grid,block,name\n");
  report(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "callbacks");
  report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernels");
  report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable copies");
  report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "enable runtime calls");
  report(cuptiActivityFlushPeriod(100), "flush period");
  std::atexit(finish);
  return 1;
}

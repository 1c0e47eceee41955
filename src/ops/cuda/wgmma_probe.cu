// Whether this GPU runs the wgmma kernels: they exist only in sm_90a code, which the driver loads on
// an sm_90 device when the build made it; a probe kernel compiled for every target says which code
// was loaded.
#include "ops/cuda/common.cuh"
#include "ops/cuda/wgmma.cuh"

namespace sanctum::ops::cuda::wg {

namespace {
__global__ void wgmma_probe(int* out) { *out = SANCTUM_HAS_WGMMA; }
}  // namespace

bool wgmma_runs() {
  static const bool runs = [] {
    int device = 0, major = 0, minor = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "compute capability");
    check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "compute capability");
    if (major != 9 || minor != 0) return false;
    int* flag = nullptr;
    check_cuda(cudaMalloc(&flag, sizeof(int)), "wgmma probe");
    wgmma_probe<<<1, 1, 0, stream()>>>(flag);
    check_launch("wgmma probe");
    int host = 0;
    check_cuda(cudaMemcpyAsync(&host, flag, sizeof(int), cudaMemcpyDeviceToHost, stream()), "wgmma probe");
    check_cuda(cudaStreamSynchronize(stream()), "wgmma probe");
    check_cuda(cudaFree(flag), "wgmma probe");
    return host == 1;
  }();
  return runs;
}

}  // namespace sanctum::ops::cuda::wg

#include "ops/cuda/blas.cuh"
#include "ops/cuda/common.cuh"

namespace sanctum::ops::cuda {

cublasHandle_t blas_handle() {
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    check_blas(cublasCreate(&h), "cublasCreate");
    check_blas(cublasSetStream(h, stream()), "cublasSetStream");
    return h;
  }();
  return handle;
}

void check_blas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(ErrorKind::internal, std::string("[") + what + "] cuBLAS error " + std::to_string(static_cast<int>(status)));
}

void* scratch_bytes(Tensor& slot, size_t bytes) {
  if (!slot || slot.nbytes() < bytes) slot = Tensor::zeros({static_cast<int64_t>((bytes + 3) / 4)}, DType::f32, Device::cuda);
  return slot.raw();
}

}  // namespace sanctum::ops::cuda

#include <dlfcn.h>

#include "ops/cuda/blas.cuh"
#include "ops/cuda/common.cuh"

namespace sanctum::ops::cuda {

namespace {

// The C entry points (the header also declares 64-bit-size C++ overloads of the GEMMs).
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
                                  cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
                                  cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                                const void*, cudaDataType, int, long long, const void*, cudaDataType, int, long long,
                                                const void*, void*, cudaDataType, int, long long, int, cublasComputeType_t,
                                                cublasGemmAlgo_t);

struct CublasApi {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  GemmEx gemm_ex = nullptr;
  GemmStridedBatchedEx gemm_strided_batched_ex = nullptr;
};

template <class F>
void resolve(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr) fail(ErrorKind::unsupported, std::string("libcublas.so.13 has no ") + name + ": a CUDA 13 cuBLAS is needed");
}

const CublasApi& api() {
  static const CublasApi loaded = [] {
    // The loader's search path first (LD_LIBRARY_PATH, ldconfig), then the toolkit this was built with.
    void* lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = dlopen(SANCTUM_CUDA_LIBRARY_DIR "/libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr)
      fail(ErrorKind::unsupported, std::string("cannot load cuBLAS (libcublas.so.13): ") + dlerror() +
                                       "; put the CUDA 13 toolkit's library directory on LD_LIBRARY_PATH");
    CublasApi a;
    resolve(lib, "cublasCreate_v2", a.create);
    resolve(lib, "cublasSetStream_v2", a.set_stream);
    resolve(lib, "cublasGemmEx", a.gemm_ex);
    resolve(lib, "cublasGemmStridedBatchedEx", a.gemm_strided_batched_ex);
    return a;
  }();
  return loaded;
}

}  // namespace

cublasHandle_t blas_handle() {
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    check_blas(api().create(&h), "cublasCreate");
    check_blas(api().set_stream(h, stream()), "cublasSetStream");
    return h;
  }();
  return handle;
}

void check_blas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(ErrorKind::internal, std::string("[") + what + "] cuBLAS error " + std::to_string(static_cast<int>(status)));
}

cublasStatus_t blas_gemm_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                            const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b, cudaDataType b_type, int ldb,
                            const void* beta, void* c, cudaDataType c_type, int ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return api().gemm_ex(handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc, compute, algo);
}

cublasStatus_t blas_gemm_strided_batched_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                                            const void* alpha, const void* a, cudaDataType a_type, int lda, long long stride_a,
                                            const void* b, cudaDataType b_type, int ldb, long long stride_b, const void* beta, void* c,
                                            cudaDataType c_type, int ldc, long long stride_c, int batch, cublasComputeType_t compute,
                                            cublasGemmAlgo_t algo) {
  return api().gemm_strided_batched_ex(handle, transa, transb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b, beta, c,
                                       c_type, ldc, stride_c, batch, compute, algo);
}

void* scratch_bytes(Tensor& slot, size_t bytes) {
  if (!slot || slot.nbytes() < bytes) slot = Tensor::zeros({static_cast<int64_t>((bytes + 3) / 4)}, DType::f32, Device::cuda);
  return slot.raw();
}

}  // namespace sanctum::ops::cuda

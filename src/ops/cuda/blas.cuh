#pragma once
// cuBLAS, loaded on first use: linking it would map (and relocate) half a gigabyte of libraries into
// every sanctum process, GPU or not, and cost CPU-only runs ~200 MB of resident memory. The handle is
// bound to the stream of tensor/cuda/stream.h. Also reusable device scratch for staged operands.
#include <cublas_v2.h>

#include <cstddef>

#include "tensor/tensor.h"

namespace sanctum::ops::cuda {

// Throws Error(unsupported) naming the library and what to do when libcublas.so.13 cannot be loaded.
cublasHandle_t blas_handle();
// Throws Error(internal) naming `what` unless status is CUBLAS_STATUS_SUCCESS.
void check_blas(cublasStatus_t status, const char* what);

// cublasGemmEx and cublasGemmStridedBatchedEx through the loaded library (same arguments).
cublasStatus_t blas_gemm_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                            const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b, cudaDataType b_type, int ldb,
                            const void* beta, void* c, cudaDataType c_type, int ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo);
cublasStatus_t blas_gemm_strided_batched_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                                            const void* alpha, const void* a, cudaDataType a_type, int lda, long long stride_a,
                                            const void* b, cudaDataType b_type, int ldb, long long stride_b, const void* beta, void* c,
                                            cudaDataType c_type, int ldc, long long stride_c, int batch, cublasComputeType_t compute,
                                            cublasGemmAlgo_t algo);

// A device buffer of at least `bytes`, kept in `slot` and grown on demand (contents not preserved).
void* scratch_bytes(Tensor& slot, size_t bytes);

}  // namespace sanctum::ops::cuda

#pragma once
// The process's cuBLAS handle (bound to the stream of tensor/cuda/stream.h) and reusable device
// scratch buffers for the kernels that stage data for cuBLAS.
#include <cublas_v2.h>

#include <cstddef>

#include "tensor/tensor.h"

namespace sanctum::ops::cuda {

cublasHandle_t blas_handle();
// Throws Error(internal) naming `what` unless status is CUBLAS_STATUS_SUCCESS.
void check_blas(cublasStatus_t status, const char* what);
// A device buffer of at least `bytes`, kept in `slot` and grown on demand (contents not preserved).
void* scratch_bytes(Tensor& slot, size_t bytes);

}  // namespace sanctum::ops::cuda

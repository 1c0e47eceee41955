#pragma once
// The process's one CUDA stream and the error check every CUDA call goes through. For .cu files only.
#include <cuda_runtime.h>

#include <string>

namespace sanctum::cuda {

// Created on first use (non-blocking, so it never serialises with the legacy default stream).
cudaStream_t stream();

// Throws Error(internal) "[what] CUDA error: <name>: <message>" unless status is cudaSuccess.
void check_cuda(cudaError_t status, const char* what);

}  // namespace sanctum::cuda

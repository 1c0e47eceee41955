#!/bin/sh
# Builds bench/kernels/kernels_bench against the op libraries of a CMake build dir (default build-ops).
# A build with SANCTUM_CUDA=ON links CUDA's runtime and cuBLAS too (its op library calls them).
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-ops}
build=$(cd "$build" && pwd)
cmake --build "$build" --target sanctum_ops sanctum_tensor sanctum_base
cuda_libs=""
if grep -q '^SANCTUM_CUDA:BOOL=ON' "$build/CMakeCache.txt"; then
  cuda_libs="-L/usr/local/cuda/lib64 -lcudart_static -lcublas -lcublasLt -lcuda -ldl -lrt"
fi
c++ -std=c++20 -O3 -DNDEBUG -Wall -Wextra -I"$root/src" "$root/bench/kernels/kernels_bench.cc" -o "$build/kernels_bench" \
  "$build/src/ops/libsanctum_ops.a" "$build/src/tensor/libsanctum_tensor.a" "$build/src/base/libsanctum_base.a" \
  $(pkg-config --libs libhwy) $cuda_libs -lpthread
echo "$build/kernels_bench"

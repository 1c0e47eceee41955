#!/bin/sh
# Builds bench/kernels/kernels_bench against the op libraries of a CMake build dir (default build-ops).
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-ops}
build=$(cd "$build" && pwd)
cmake --build "$build" --target sanctum_ops sanctum_tensor sanctum_base
c++ -std=c++20 -O3 -DNDEBUG -Wall -Wextra -I"$root/src" "$root/bench/kernels/kernels_bench.cc" -o "$build/kernels_bench" \
  "$build/src/ops/libsanctum_ops.a" "$build/src/tensor/libsanctum_tensor.a" "$build/src/base/libsanctum_base.a" \
  $(pkg-config --libs libhwy) -lpthread
echo "$build/kernels_bench"

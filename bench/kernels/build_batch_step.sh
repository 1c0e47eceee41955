#!/bin/sh
# Builds bench/kernels/batch_step_bench and sampling_bench against a CMake build dir (default build)
# with the link line of its sanctum binary (every module library, CUDA's too), after building it.
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
build=$(cd "$build" && pwd)
ninja -C "$build" sanctum >/dev/null
libs=$(sed -n '/^build sanctum:/,/LINK_LIBRARIES/p' "$build/build.ninja" | sed -n 's/^ *LINK_LIBRARIES = //p')
cd "$build"
for bench in batch_step_bench sampling_bench; do
  c++ -std=c++20 -O2 -DNDEBUG -Wall -Wextra -I"$root/src" -I"$build/src" "$root/bench/kernels/$bench.cc" -o "$build/$bench" $libs -lpthread
  echo "$build/$bench"
done

#!/bin/sh
# Builds bench/kernels/batch_step_bench against a CMake build dir (default build) with the link line
# of its sanctum binary (every module library), after building that binary.
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
build=$(cd "$build" && pwd)
ninja -C "$build" sanctum >/dev/null
libs=$(sed -n '/^build sanctum:/,/LINK_LIBRARIES/p' "$build/build.ninja" | sed -n 's/^ *LINK_LIBRARIES = //p')
cd "$build"
c++ -std=c++20 -O2 -DNDEBUG -Wall -Wextra -I"$root/src" -I"$build/src" "$root/bench/kernels/batch_step_bench.cc" -o "$build/batch_step_bench" \
  $libs -lpthread
echo "$build/batch_step_bench"

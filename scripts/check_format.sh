#!/usr/bin/env bash
# CI's formatting gate: fails, naming the files, when a tracked C++/CUDA source differs from what
# clang-format 14 and .clang-format make of it (scripts/format.sh rewrites them).
exec "$(dirname "$0")/format.sh" --check "$@"

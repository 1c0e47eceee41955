#!/usr/bin/env bash
# Builds every libFuzzer target (tests/fuzz/*_fuzz.cc) with clang, ASan and UBSan in build-fuzz/ (no CUDA
# backend: the parsers under fuzz do not touch it, and it would only add nvcc time), then
# runs each for a bounded time with its seed corpus from tests/data/fuzz/<name without _fuzz>/.
#   FUZZ_SECONDS   seconds per target (default 30)
#   FUZZ_TARGETS   space-separated target names to run (default: all)
#   FUZZ_JOBS      build parallelism (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${FUZZ_SECONDS:-30}"
BUILD=build-fuzz
CXX_BIN="$(command -v clang++ || true)"
C_BIN="$(command -v clang || true)"
if [[ -z "$CXX_BIN" || -z "$C_BIN" ]]; then echo "fuzz: clang is required" >&2; exit 1; fi

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$C_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
  -DSANCTUM_FUZZ=ON -DSANCTUM_TESTS=ON -DSANCTUM_CUDA=OFF >/dev/null

mapfile -t ALL < <(ls tests/fuzz/*_fuzz.cc 2>/dev/null | xargs -n1 basename | sed 's/\.cc$//')
TARGETS=(${FUZZ_TARGETS:-${ALL[@]}})
if [[ ${#TARGETS[@]} -eq 0 ]]; then echo "fuzz: no targets"; exit 0; fi
cmake --build "$BUILD" --target "${TARGETS[@]}" -j "${FUZZ_JOBS:-$(nproc)}"

status=0
for t in "${TARGETS[@]}"; do
  seeds="tests/data/fuzz/${t%_fuzz}"
  work="$BUILD/corpus/$t"
  mkdir -p "$work" "$BUILD/artifacts/$t"
  args=("$work")
  [[ -d "$seeds" ]] && args+=("$seeds")
  echo "== $t: ${SECONDS_PER_TARGET}s"
  if ! UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
      "$BUILD/tests/fuzz/$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=4096 \
      -max_len=65536 -artifact_prefix="$BUILD/artifacts/$t/" -print_final_stats=1 "${args[@]}" 2>"$BUILD/$t.log"; then
    echo "fuzz: $t FAILED (see $BUILD/$t.log and $BUILD/artifacts/$t/)" >&2
    tail -40 "$BUILD/$t.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$BUILD/$t.log" | tr '\n' ' '
    echo
  fi
done
exit $status

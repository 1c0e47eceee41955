#!/usr/bin/env bash
# The GPU check in two halves, because the GPU machine has none of our build dependencies:
#
#   scripts/gpu_check.sh bundle          here: builds the CUDA backend (build-cuda/), packs the binary,
#                                        the GPU op tests and the non-system shared libraries into
#                                        dist/gpu/bundle.tar.xz, and fetches the mlx wheels the
#                                        reference side of the parity suite needs into dist/gpu/wheels
#                                        (with jsonschema's, for the answers the checks validate).
#   scripts/gpu_check.sh run [stages]    on the GPU machine (Python with torch/transformers, CUDA 13):
#                                        unpacks, runs the CUDA op tests, the mlx-lm and transformers
#                                        parity suites with --device cuda, the CUDA-graph on/off
#                                        check, the bf16-against-f32 check, the KV cache in bf16, q8 and
#                                        q4v against the CPU's, the split-norm check and every tuning
#                                        knob's off path,
#                                        then each stage named:
#                                        --large (27B-shape parity with transformers), --vision (the vision
#                                        tower and image prompts on the GPU against transformers, mlx-vlm
#                                        fixtures in $DIST/mlx_vl if there, and the CPU), --vision-bench (a
#                                        1024x1024 image through the Qwen3.5 tower beside transformers on
#                                        torch CUDA, f32 then bf16), --constrained (grammar-constrained
#                                        decode through a server: the masks applied on the GPU give the
#                                        CPU's greedy answers, sampled answers validate), --ops=FILTER (only
#                                        the op tests a gtest filter names), --kv-dtype (the KV cache
#                                        dtype check alone, e.g. after --no-checks), --perf[=NAME] (kernel
#                                        timings at production shapes; NAME picks tests), --bench (the GPU
#                                        benchmark with the transformers peer), --bench-sanctum (without
#                                        it), --sweep=NAME=V1,V2 and --sweep-prefill=NAME=V1,V2 (decode, or
#                                        prefill at 4,096 tokens, for each value of a tuning knob such as
#                                        fuse_norm=0,1, or of an environment variable, timed in
#                                        turns; SANCTUM_SWEEP_SHAPES and SANCTUM_SWEEP_ROUNDS narrow it,
#                                        SANCTUM_SWEEP_CONTEXT sets decode's prompt, 512 by default);
#                                        --no-checks first skips the op tests and parity suites.
#                                        Logs go to $OUT when set.
#
# SANCTUM_CUDA_BUILD and SANCTUM_GPU_DIST move the build folder and the bundle (defaults build-cuda,
# dist/gpu), so that several trees of work can be bundled side by side. SANCTUM_GPU_BASE names another
# build's sanctum binary to bundle as bin/sanctum-base, for decode of two builds in turns:
#   run --no-checks --sweep=SANCTUM_BIN=/tmp/sanctum-gpu/bin/sanctum-base,/tmp/sanctum-gpu/bin/sanctum
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SANCTUM_CUDA_BUILD:-build-cuda}
DIST=${SANCTUM_GPU_DIST:-dist/gpu}

bundle() {
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSANCTUM_CUDA=ON -DSANCTUM_WERROR=ON > /dev/null
  local tests=()  # every tests/gpu/cuda_*_test.cc is a test target of the same name (or those SANCTUM_GPU_TESTS names)
  if [ "${SANCTUM_GPU_TESTS:-}" = none ]; then :
  elif [ -n "${SANCTUM_GPU_TESTS:-}" ]; then read -r -a tests <<< "$SANCTUM_GPU_TESTS"
  else for f in tests/gpu/cuda_*_test.cc; do tests+=("$(basename "$f" .cc)"); done; fi
  cmake --build "$BUILD" -j "$(nproc)" --target sanctum "${tests[@]+"${tests[@]}"}"
  rm -rf "$DIST/stage" && mkdir -p "$DIST/stage/bin" "$DIST/stage/lib"
  cp "$BUILD/sanctum" "$DIST/stage/bin/"
  if [ -n "${SANCTUM_GPU_BASE:-}" ]; then cp "$SANCTUM_GPU_BASE" "$DIST/stage/bin/sanctum-base"; fi
  for t in "${tests[@]+"${tests[@]}"}"; do cp "$BUILD/tests/$t" "$DIST/stage/bin/"; done
  # Libraries the GPU machine's Ubuntu lacks or has under another soname (the image decoders too).
  # glibc, libstdc++, OpenSSL 3, zlib and PCRE2 are there in compatible versions; CUDA's own libraries
  # come from its toolkit.
  for lib in $(ldd "$BUILD/sanctum" "$BUILD"/tests/cuda_*_test | awk '/=> \//{print $3}' | sort -u); do
    case "$(basename "$lib")" in
      libhwy*|libicu*|libyaml-cpp*|libpng*|libjpeg*|libwebp*|libgif*) cp -L "$lib" "$DIST/stage/lib/" ;;
    esac
  done
  # SANCTUM_GPU_NO_UNICODE_DATA=1: ICU's 31 MB data library replaced by a stand-in holding only its one
  # symbol, for bundles whose checks load no tokenizer (the vision checks), so that the binary and an op
  # test fit the carry limit. Anything that normalizes text then fails with ICU's missing-data error.
  if [ "${SANCTUM_GPU_NO_UNICODE_DATA:-}" = 1 ]; then
    for data in "$DIST"/stage/lib/libicudata.so.*; do
      [ -e "$data" ] || continue
      local symbol
      symbol=$(nm -D --defined-only "$data" | awk '$3 ~ /^icudt[0-9]+_dat$/ {print $3}')
      echo "const char $symbol[32] __attribute__((aligned(16))) = {0};" > "$DIST/stage/icudata.c"
      gcc -shared -fPIC -Wl,-soname,"$(basename "$data")" -o "$data" "$DIST/stage/icudata.c"
      rm "$DIST/stage/icudata.c"
    done
  fi
  # The kernel timeline library for bench/gpu/trace_decode.py, with the CUPTI it was built against.
  if cmake --build "$BUILD" --target sanctum_kernel_trace > /dev/null 2>&1; then
    cp "$BUILD/libsanctum_kernel_trace.so" "$DIST/stage/lib/"
    cp -L "$(ldd "$BUILD/libsanctum_kernel_trace.so" | awk '/libcupti/{print $3}')" "$DIST/stage/lib/"
  fi
  strip --strip-unneeded "$DIST"/stage/bin/*  # symbols are not needed there; the carry is size-limited
  # xz -9e: its 64 MiB window spans several binaries, which share most of their code (a bundle with
  # tests or a second sanctum comes out at about 60% of the default level's size; the device machine
  # takes at most 64 MiB of tree and bundle together).
  tar -C "$DIST/stage" -cf - bin lib | xz -9e -T"$(nproc)" > "$DIST/bundle.tar.xz"
  rm -rf "$DIST/stage"
  if [ ! -f "$DIST/wheels/.complete" ] && [ -f dist/gpu/wheels/.complete ] && [ "$DIST" != dist/gpu ]; then
    mkdir -p "$DIST" && cp -r dist/gpu/wheels "$DIST/"
  fi
  if [ ! -f "$DIST/wheels/.complete" ]; then
    mkdir -p "$DIST/wheels"
    .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_35_x86_64 -d "$DIST/wheels" mlx==0.32.4 mlx-cpu==0.32.4 mlx-lm==0.32.2
    touch "$DIST/wheels/.complete"
  fi
  if [ ! -f "$DIST/wheels/.jsonschema" ]; then  # the GPU machine's Python has attrs and typing-extensions, not these
    .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_35_x86_64 --platform manylinux_2_17_x86_64 -d "$DIST/wheels" \
      jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
    touch "$DIST/wheels/.jsonschema"
  fi
  # The constrained check's small-vocabulary model, made here: a bundle without the mlx wheels can run it.
  .venv/bin/python -c 'import sys; sys.path.insert(0, "tests/e2e"); import small_vocab_model as m, pathlib as p; m.make_model(p.Path(sys.argv[1]), "chatml")' \
    "$DIST/small_vocab_chatml"
  du -sh "$DIST"/bundle.tar.xz "$DIST"/wheels
}

cuda_lib_dirs() {
  # cuBLAS 13 from the toolkit, the linker cache or the Python wheels, whichever exists.
  local dirs=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -e "$d/libcublas.so.13" ] && dirs="$dirs:$d"; done
  local py
  py=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
  [ -n "$py" ] && [ -e "$py/libcublas.so.13" ] && dirs="$dirs:$py"
  echo "${dirs#:}"
}

op_tests() { ls /tmp/sanctum-gpu/bin/cuda_*_test 2>/dev/null | grep -v perf_test || true; }

run() {
  local out=${OUT:-/tmp/gpu_check}
  mkdir -p "$out" /tmp/sanctum-gpu
  tar -C /tmp/sanctum-gpu -xJf "$DIST/bundle.tar.xz"
  export LD_LIBRARY_PATH="/tmp/sanctum-gpu/lib:$(cuda_lib_dirs)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export SANCTUM_BIN=/tmp/sanctum-gpu/bin/sanctum SANCTUM_KERNEL_TRACE_LIB=/tmp/sanctum-gpu/lib/libsanctum_kernel_trace.so
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
  if ls "$DIST"/wheels/*.whl > /dev/null 2>&1; then  # the parity references; a bundle for op tests alone may leave them out
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/sanctum-gpu/site "$DIST"/wheels/*.whl
  fi
  export PYTHONPATH=/tmp/sanctum-gpu/site PYTHONUNBUFFERED=1
  local status=0
  if [ "${1:-}" = "--no-checks" ]; then
    shift
  else
    echo "== CUDA op tests"
    for t in $(op_tests); do
      "$t" --gtest_brief=1 2>&1 | tee -a "$out/ops.log" || status=1
    done
    echo "== parity with mlx-lm and transformers, --device cuda"
    SANCTUM_PARITY_DEVICE_ARGS="--device cuda --matmul-precision f32" \
      python3 -m pytest -q -p no:cacheprovider tests/parity/test_llama_like.py tests/parity/test_hybrid_moe.py \
      tests/parity/test_hf_fixtures.py 2>&1 | tee "$out/parity.log" | tail -15 || status=1
    grep -q " failed\| error" "$out/parity.log" && status=1
    echo "== recorded decode steps (CUDA graphs) on and off"
    python3 tests/gpu/cuda_graph_check.py 2>&1 | tee "$out/graphs.log" || status=1
    echo "== the bf16 mode (tiled weights) against the f32 mode"
    python3 tests/gpu/bf16_mode_check.py 2>&1 | tee "$out/bf16.log" || status=1
    echo "== the KV cache in bf16, q8 and q4v on the GPU against the CPU's"
    python3 tests/gpu/kv_dtype_check.py 2>&1 | tee "$out/kv_dtype.log" || status=1
    echo "== the split RMSNorm against add+RMSNorm (one-token steps, bf16 mode)"
    python3 tests/gpu/split_norm_check.py 2>&1 | tee "$out/split_norm.log" || status=1
    echo "== every tuning knob off, one at a time, against the defaults"
    python3 tests/gpu/tuning_off_paths_check.py 2>&1 | tee "$out/tuning_off_paths.log" || status=1
  fi
  for stage in "$@"; do
    case "$stage" in
      --large)
        echo "== large-shape parity with transformers (Qwen3.5-27B layer shapes)"
        SANCTUM_KV_CACHE_DTYPE=${SANCTUM_KV_CACHE_DTYPE:-f32} python3 tests/gpu/large_shape_parity.py 2>&1 | tee "$out/large.log" | tail -3 || status=1
        grep -q "PASS" "$out/large.log" || status=1 ;;
      --vision)
        echo "== the vision tower and image prompts, --device cuda against the references and the CPU"
        local mlx=()
        [ -d "$DIST/mlx_vl" ] && mlx=(--mlx-fixtures "$DIST/mlx_vl")
        SANCTUM_KV_CACHE_DTYPE=${SANCTUM_KV_CACHE_DTYPE:-f32} python3 tests/gpu/cuda_vision_check.py "${mlx[@]+"${mlx[@]}"}" 2>&1 | tee "$out/vision.log" || status=1 ;;
      --vision-bench)
        echo "== a 1024x1024 image through the Qwen3.5 tower, sanctum and transformers on the GPU"
        for p in f32 bf16; do
          python3 bench/vision_encode.py --sanctum "$SANCTUM_BIN" --device cuda --precision $p 2>&1 | tee -a "$out/vision_bench.log" || status=1
        done ;;
      --constrained)
        echo "== grammar-constrained decode: masks applied on the GPU against the CPU's answers"
        python3 tests/gpu/constrained_decode_check.py --model-dir "$DIST/small_vocab_chatml" 2>&1 | tee "$out/constrained.log" || status=1 ;;
      --kv-dtype)
        echo "== the KV cache in bf16, q8 and q4v on the GPU against the CPU's"
        python3 tests/gpu/kv_dtype_check.py 2>&1 | tee "$out/kv_dtype.log" || status=1 ;;
      --ops=*)
        echo "== CUDA op tests matching ${stage#--ops=}"
        for t in $(op_tests); do
          "$t" --gtest_brief=1 --gtest_filter="${stage#--ops=}" 2>&1 | tee -a "$out/ops.log" || status=1
        done ;;
      --perf|--perf=*)
        local filter='*Perf*'
        [ "$stage" != --perf ] && filter="*Perf*${stage#--perf=}*"
        echo "== kernel timings at production shapes ($filter)"
        /tmp/sanctum-gpu/bin/cuda_perf_test --gtest_also_run_disabled_tests --gtest_filter="$filter" 2>&1 | tee -a "$out/perf.log" || status=1 ;;
      --bench)
        echo "== benchmark"
        python3 bench/gpu/run_bench.py --out "$out/bench.json" 2>&1 | tee "$out/bench.log" || status=1 ;;
      --bench-sanctum)
        echo "== benchmark (sanctum only)"
        python3 bench/gpu/run_bench.py --no-peer --out "$out/bench.json" 2>&1 | tee "$out/bench.log" || status=1 ;;
      --sweep=*|--sweep-prefill=*)
        local kind=${stage%%=*} setting=${stage#*=} prefill=()
        [ "$kind" = --sweep-prefill ] && prefill=(--prefill 4096)
        echo "== ${kind#--} $setting"
        python3 bench/gpu/decode_sweep.py --shapes "${SANCTUM_SWEEP_SHAPES:-mistral-24b,qwen3_5-27b,qwen3_5_moe-35b-a3b}" --env "$setting" \
          --rounds "${SANCTUM_SWEEP_ROUNDS:-2}" --decode-context "${SANCTUM_SWEEP_CONTEXT:-512}" "${prefill[@]}" --out "$out/sweep-${setting%%=*}.json" 2>&1 | tee -a "$out/sweep.log" || status=1 ;;
      *) echo "unknown stage $stage" >&2; status=1 ;;
    esac
  done
  return $status
}

case "${1:-}" in
  bundle) bundle ;;
  run) shift; run "$@" ;;
  *) echo "usage: scripts/gpu_check.sh bundle | run [--no-checks] [--ops=FILTER] [--kv-dtype] [--constrained] [--large] [--perf[=NAME]]" \
          "[--bench | --bench-sanctum]" \
          "[--sweep=NAME=V1,V2] [--sweep-prefill=NAME=V1,V2]" >&2; exit 2 ;;
esac

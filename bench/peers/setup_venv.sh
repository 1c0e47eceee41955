#!/usr/bin/env bash
# Creates .venv-bench with the llama.cpp peer and the GGUF writer.
# llama-cpp-python builds llama.cpp from source; the native build's AMX path
# segfaults at the first decode on the bench machines, so the ISA is spelled
# out with AMX off. One build job keeps a shared machine responsive.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${SANCTUM_BENCH_VENV:-$root/.venv-bench}"
reqs="$root/bench/peers/requirements.txt"

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import llama_cpp, gguf' 2>/dev/null; then
  echo "bench venv ready: $venv"
  exit 0
fi

python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-1}"
"$venv/bin/pip" install --no-cache-dir -r "$reqs"
"$venv/bin/python" -c 'import llama_cpp, gguf; print("llama_cpp", llama_cpp.__version__)'

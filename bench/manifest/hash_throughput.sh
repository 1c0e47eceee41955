#!/usr/bin/env bash
# Hash throughput of the manifest gate against sha256sum on the same files, in the same run.
#
#   bench/manifest/hash_throughput.sh [SANCTUM_BIN] [TOTAL_GB] [SHARDS]
#
# Makes a TOTAL_GB (default 4) model-like directory under /tmp (SHARDS safetensors-named files of
# random bytes plus config/tokenizer files), generates and signs a manifest, reads every file once so
# the page cache is warm, then times, best of $REPS (default 3):
#   - sha256sum over the files (coreutils, one thread)
#   - sanctum manifest verify --pubkey --model   (signature + path checks + parallel hashing, all cores)
#   - the same with --threads 1                  (what OpenSSL's SHA-256 alone buys)
# Numbers are warm-cache (this script drops no caches; that would need root and would measure the
# disk instead). The directory is removed on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BIN="${1:-${SANCTUM_BIN:-$ROOT/build/sanctum}}"
TOTAL_GB="${2:-4}"
SHARDS="${3:-4}"
REPS="${REPS:-3}"
[[ -x "$BIN" ]] || { echo "sanctum binary not found at $BIN (build first or pass it as the first argument)" >&2; exit 2; }

WORK="$(mktemp -d /tmp/sanctum-hashbench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
MODEL="$WORK/model"
mkdir -p "$MODEL"

# Random bytes fast: AES-CTR keystream over zeros (incompressible, like quantized weights).
shard_bytes=$(( TOTAL_GB * 1000000000 / SHARDS ))
echo "== creating $SHARDS shards of $shard_bytes bytes in $MODEL"
for i in $(seq 1 "$SHARDS"); do
  name=$(printf 'model-%05d-of-%05d.safetensors' "$i" "$SHARDS")
  { openssl enc -aes-128-ctr -nosalt -pass "pass:shard$i" -pbkdf2 -in /dev/zero 2>/dev/null || true; } | head -c "$shard_bytes" > "$MODEL/$name"
done
echo '{"model_type": "qwen2", "hidden_size": 4096}' > "$MODEL/config.json"
head -c 2000000 /dev/urandom | base64 > "$MODEL/tokenizer.json" || true
echo '{}' > "$MODEL/tokenizer_config.json"

"$BIN" manifest keygen --out "$WORK/bench.key" > /dev/null
"$BIN" manifest generate "$MODEL" --out "$WORK/model.sha256" 2> /dev/null
"$BIN" manifest sign --key "$WORK/bench.key" "$WORK/model.sha256" > /dev/null
mapfile -t FILES < <(cut -c67- "$WORK/model.sha256")
BYTES=$(cd "$MODEL" && du -cb --apparent-size "${FILES[@]}" | tail -1 | cut -f1)
cat "$MODEL"/* > /dev/null  # warm the page cache

now() { date +%s.%N; }
best_of() {  # best_of CMD... -> fastest wall seconds over $REPS runs (output discarded, failure fatal)
  local best="" t0 t1 dt
  for _ in $(seq 1 "$REPS"); do
    t0=$(now); "$@" > /dev/null; t1=$(now)
    dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
    if [[ -z "$best" ]] || awk -v d="$dt" -v b="$best" 'BEGIN { exit !(d < b) }'; then best=$dt; fi
  done
  echo "$best"
}
sha256sum_all() { (cd "$MODEL" && sha256sum -c --quiet "$WORK/model.sha256"); }
sanctum_verify() { "$BIN" manifest verify --pubkey "$WORK/bench.key.pub" "$WORK/model.sha256" --model "$MODEL" "$@"; }

CORES=$(nproc)
T_SHA=$(best_of sha256sum_all)
T_SAN=$(best_of sanctum_verify)
T_ONE=$(best_of sanctum_verify --threads 1)
gbps() { awk -v n="$BYTES" -v t="$1" 'BEGIN { printf "%.3f", n / t / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "== hash throughput, warm page cache, $BYTES bytes in ${#FILES[@]} files ($SHARDS shards), $CORES cores, best of $REPS"
echo "   sha256sum links: $(ldd "$(command -v sha256sum)" | grep -o -m1 'libcrypto[^ ]*' | head -1 | grep . || echo 'no libcrypto (gnulib C SHA-256)')"
echo "   cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), sha_ni: $(grep -qw sha_ni /proc/cpuinfo && echo yes || echo no)"
printf 'sha256sum -c (coreutils %s, 1 thread)          %7.3f s  %6.3f GB/s\n' "$(sha256sum --version | head -1 | awk '{print $NF}')" "$T_SHA" "$(gbps "$T_SHA")"
printf 'sanctum manifest verify (sig + hashes, %2d thr)  %7.3f s  %6.3f GB/s  %5.2fx sha256sum\n' "$CORES" "$T_SAN" "$(gbps "$T_SAN")" "$(ratio "$T_SHA" "$T_SAN")"
printf 'sanctum manifest verify --threads 1            %7.3f s  %6.3f GB/s  %5.2fx sha256sum\n' "$T_ONE" "$(gbps "$T_ONE")" "$(ratio "$T_SHA" "$T_ONE")"

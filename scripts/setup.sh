#!/usr/bin/env bash
# Idempotent setup for a fresh Debian 12 machine: apt packages, the test venv (.venv), the build.
# Usage: scripts/setup.sh [--no-venv]
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git clang libclang-rt-14-dev clang-format-14
  libhwy-dev nlohmann-json3-dev libpcre2-dev libssl-dev libgtest-dev libgmock-dev
  python3 python3-venv python3-dev time
  libboost-dev libicu-dev zlib1g-dev
  libyaml-cpp-dev systemd curl
  libpng-dev libjpeg62-turbo-dev libwebp-dev libgif-dev  # src/image decoders
  chromium chromium-driver  # tests/ui drive the chat page in headless Chromium
)

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

if [ "${1:-}" != "--no-venv" ]; then
  # Debian's own python3, so the venv is the same on every machine.
  if [ ! -x .venv/bin/python ]; then /usr/bin/python3 -m venv .venv; fi
  stamp=.venv/.requirements.sha256
  want=$(cat tools/requirements-test.txt tools/requirements-test-nodeps.txt | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -r tools/requirements-test.txt
    .venv/bin/pip install -q --no-deps -r tools/requirements-test-nodeps.txt
    echo "$want" > "$stamp"
  fi
fi

werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSANCTUM_WERROR="$werror" > /dev/null
cmake --build build -j "$(nproc)"

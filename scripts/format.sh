#!/usr/bin/env bash
# Formats the tracked C++/CUDA sources in place with clang-format 14 and the root .clang-format.
# Usage: scripts/format.sh [--check] [FILE...]
#   --check  change nothing; list the files that are not formatted and exit 1 if there are any.
#   FILE...  only these files (default: every tracked *.cc *.h *.cu *.cuh *.cpp).
# CLANG_FORMAT names the binary (default: clang-format-14, else clang-format if it is version 14).
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi

# Another major version lays out some constructs differently, so the check would disagree with the tree.
cf="${CLANG_FORMAT:-}"
if [ -z "$cf" ]; then
  if command -v clang-format-14 > /dev/null; then cf=clang-format-14; else cf=clang-format; fi
fi
version=$("$cf" --version 2> /dev/null | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p' || true)
if [ "$version" != "14" ]; then
  echo "format: need clang-format 14, found '${version:-none}' ($cf); install it with scripts/setup.sh or set CLANG_FORMAT" >&2
  exit 2
fi

files=()
if [ $# -gt 0 ]; then
  files=("$@")
else
  # tests/data holds third-party text whose names happen to end in .cpp.
  mapfile -d '' tracked < <(git ls-files -z -- '*.cc' '*.h' '*.cu' '*.cuh' '*.cpp' ':!:tests/data/**')
  for f in "${tracked[@]}"; do [ -f "$f" ] && files+=("$f"); done  # not the ones deleted but not yet committed
fi
[ ${#files[@]} -gt 0 ] || exit 0
jobs=$(nproc)

if [ "$check" = 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 32 -P "$jobs" "$cf" -i --style=file
  echo "format: ${#files[@]} files formatted in place"
  exit 0
fi

# Each file against clang-format's rendering of it: its name and first differing line when they differ,
# "!name" when clang-format itself fails on it.
check_one() {
  local f r out
  out=$(mktemp)
  for f; do
    "$cf" --style=file "$f" > "$out" || { echo "!$f"; continue; }
    r=$(cmp "$out" "$f" 2>&1) && continue
    echo "$f:$(sed -n 's/.* line \([0-9]*\).*/\1/p' <<< "$r")"
  done
  rm -f "$out"
}
export -f check_one
export cf
bad=$(printf '%s\0' "${files[@]}" | xargs -0 -n 32 -P "$jobs" bash -c 'check_one "$@"' _ | sort)
if grep -q '^!' <<< "$bad"; then
  echo "format: clang-format failed on:" >&2
  grep '^!' <<< "$bad" | cut -c2- >&2
  exit 2
fi
if [ -n "$bad" ]; then
  echo "$bad"
  echo "format: $(wc -l <<< "$bad") file(s) not formatted (first differing line shown); run scripts/format.sh" >&2
  exit 1
fi
echo "format: ${#files[@]} files formatted"

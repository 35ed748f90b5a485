#!/usr/bin/env bash
# Prints the Debian packages that provide the shared libraries the given
# binaries load (per ldd), one per line, sorted. deploy/Dockerfile installs
# exactly these in its runtime stages, so the image follows the build's real
# dependencies instead of a hand-kept list.
#
#   deploy/runtime-packages.sh build/server/tdstored build/client/tdstore
#
# tdstore's own libraries (libtdstore_*) are skipped. Fails, naming it, on a
# library ldd cannot find and on any other library no installed package owns.
set -euo pipefail

libs=()
for binary in "$@"; do
  out=$(ldd "$binary") || { echo "runtime-packages: ldd failed on $binary" >&2; exit 1; }
  if grep -q 'not found' <<<"$out"; then
    echo "runtime-packages: $binary: $(grep 'not found' <<<"$out")" >&2
    exit 1
  fi
  # Lines like "libfoo.so.1 => /usr/lib/x86_64-linux-gnu/libfoo.so.1 (0x...)".
  while read -r lib; do
    case "$(basename "$lib")" in libtdstore_*) continue ;; esac
    libs+=("$lib")
  done < <(awk '$2 == "=>" && $3 ~ /^\// {print $3}' <<<"$out")
done
[ ${#libs[@]} -gt 0 ] || exit 0

# Debian 12 has merged /usr: dpkg may know a file as /lib/... or /usr/lib/...,
# and by its name or its symlink's. Ask once for every spelling (one dpkg
# call: each takes ~0.5 s) and keep the ones dpkg knows.
variants() {
  local p
  for p in "$1" "$(realpath "$1")"; do
    echo "$p"
    case "$p" in /usr/*) echo "${p#/usr}" ;; *) echo "/usr$p" ;; esac
  done
}
declare -A owner
mapfile -t queries < <(for lib in "${libs[@]}"; do variants "$lib"; done | sort -u)
while IFS= read -r line; do
  # "libfoo1:amd64: /usr/lib/x86_64-linux-gnu/libfoo.so.1"
  owner["${line##*: }"]=${line%%:*}
done < <(dpkg-query -S "${queries[@]}" 2>/dev/null | grep -v '^diversion' || true)

for lib in "${libs[@]}"; do
  package=""
  while read -r v; do
    if [ -n "${owner[$v]:-}" ]; then package=${owner[$v]}; break; fi
  done < <(variants "$lib")
  [ -n "$package" ] || { echo "runtime-packages: no package owns $lib" >&2; exit 1; }
  echo "$package"
done | sort -u

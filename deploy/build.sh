#!/usr/bin/env bash
# Configures and builds tdstore into ./build.
# Usage: [TDSTORE_BUILD_TYPE=...] deploy/build.sh [extra cmake args...]
# The build type defaults to RelWithDebInfo (-O2 -g: what docs/benchmarks.md
# measured); tests/run.sh builds Release, since debug info costs about a third
# of the compile time and CI reads none of it.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${TDSTORE_BUILD_TYPE:-RelWithDebInfo}" \
  -DTDSTORE_BUILD_CLIENT=ON -DTDSTORE_BUILD_TESTS=ON "$@" >/dev/null
# Two cores, and torch-heavy translation units need ~1.5 GB each: -j2.
cmake --build build -j "${TDSTORE_BUILD_JOBS:-2}"

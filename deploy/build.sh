#!/usr/bin/env bash
# Configures and builds tdstore into ./build (Release with debug info).
# Usage: deploy/build.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTDSTORE_BUILD_CLIENT=ON -DTDSTORE_BUILD_TESTS=ON "$@" >/dev/null
# Two cores, and torch-heavy translation units need ~1.5 GB each: -j2.
cmake --build build -j "${TDSTORE_BUILD_JOBS:-2}"

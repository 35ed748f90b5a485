#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the whole test suite:
# installs the apt packages, builds, builds the wheel (deploy/build-wheel.sh),
# makes the Python environment (build/venv: pinned torch, tensordict, torchrl
# and that wheel), and runs every C++ and Python test with ctest. The tests start
# (and stop) the real redis-server, Redis Cluster and tdstored processes they
# need. Says how long each stage took, and the slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."

stage_times=()
stage() {
  local name="$1"
  shift
  local start=$SECONDS
  echo "== run.sh: $name"
  "$@"
  stage_times+=("$(printf '%-8s %5d s' "$name" $((SECONDS - start)))")
}
report() {
  echo "== run.sh: stage times"
  printf '   %s\n' "${stage_times[@]}"
}
trap report EXIT

stage deps deploy/install-deps.sh
# Release: -O3 without debug info compiles a third faster than the
# RelWithDebInfo that deploy/build.sh makes by default.
stage build env TDSTORE_BUILD_TYPE="${TDSTORE_BUILD_TYPE:-Release}" deploy/build.sh
# The Python suite runs against the wheel users install (tdstored and the
# CLI from this build, bundled with their libraries): test_wheel.py checks it.
stage wheel deploy/build-wheel.sh
stage python env TDSTORE_WHEEL="$(ls dist/tdstore-*.whl)" deploy/python-env.sh build/venv
cd build
export TDSTORE_TEST_WHEEL=1
stage tests ctest --output-on-failure -j "${TDSTORE_TEST_JOBS:-2}" "$@"

#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the whole test suite:
# installs the apt packages, builds, and runs every test with ctest. The tests
# start (and stop) the real redis-server and tdstored processes they need.
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
deploy/build.sh
cd build
ctest --output-on-failure -j "${TDSTORE_TEST_JOBS:-2}" "$@"

#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the whole test suite:
# installs the apt packages, builds, makes the Python environment (build/venv:
# pinned torch, tensordict, torchrl and the tdstore package built from this
# checkout), and runs every C++ and Python test with ctest. The tests start
# (and stop) the real redis-server, Redis Cluster and tdstored processes they
# need.
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
deploy/build.sh
deploy/python-env.sh build/venv
cd build
ctest --output-on-failure -j "${TDSTORE_TEST_JOBS:-2}" "$@"

#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running tdstored:
# installs the apt packages, builds, and runs tdstored in the foreground with
# its embedded Redis on 127.0.0.1:50051. Extra arguments go to tdstored
# (e.g. --data-dir ./data to persist, --redis redis://host:6379 to use yours).
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
deploy/build.sh
exec build/server/tdstored "$@"

#!/usr/bin/env bash
# ctest's python_tests.{standalone,cluster}: the Python suite (tests/python) with the tdstore
# package installed in a virtual environment made by deploy/python-env.sh.
#
#   tests/python/run_pytest.sh [VENV_DIR] [pytest args...]    # default: build/venv
#
# A missing environment or package FAILS (with what to run), never skips.
# tdstored comes from $TDSTORE_TDSTORED (ctest sets it; default
# build/server/tdstored), redis-server from $TDSTORE_REDIS_SERVER or PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${1:-build/venv}"
shift || true
if [ ! -x "$venv/bin/python" ]; then
  echo "python_tests: no virtual environment at $venv; make it with: deploy/python-env.sh $venv" >&2
  exit 1
fi
if ! "$venv/bin/python" -c "import tdstore._native" 2>/dev/null; then
  echo "python_tests: $venv has no working tdstore package; (re)install it with: deploy/python-env.sh $venv" >&2
  "$venv/bin/python" -c "import tdstore._native" || true
  exit 1
fi
# -p no:cacheprovider: no .pytest_cache in the source tree.
exec "$venv/bin/python" -m pytest tests/python -q -p no:cacheprovider "$@"

#!/usr/bin/env bash
# ctest's python_tests: the pytest suite in the virtual environment $1,
# against the tdstored in $TDSTORE_TDSTORED. Extra arguments go to pytest.
set -euo pipefail
venv="$1"; shift
if [ ! -x "$venv/bin/python" ]; then
  echo "no Python environment at $venv: run deploy/python-env.sh $venv first (tests/run.sh does)" >&2
  exit 1
fi
cd "$(dirname "$0")/../.."
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python "$@"

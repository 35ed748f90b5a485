#!/usr/bin/env bash
# Creates (or updates) a virtual environment with the Python package
# `tdstore` built from this checkout, and what its tests and benchmarks use.
#
#   deploy/python-env.sh [VENV_DIR]        # default: build/venv
#
# Order matters: torch is pinned and installed first (a CPU build of 2.13.0
# lies on these machines' disk; anything that admits a newer torch would
# download a CUDA build of several GB), so tensordict's and torchrl's own
# requirement on torch is already met when they install. The native module is
# then built with CMake against the system's gRPC, protobuf and abseil
# (deploy/install-deps.sh installs them); it never links libtorch. With
# TDSTORE_WHEEL=dist/tdstore-*.whl (deploy/build-wheel.sh) that wheel is
# installed instead, as users install it.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-build/venv}"
python="${PYTHON:-python3}"
torch_version="2.13.0"

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
# pip warns for every index folder a package is missing from: noise.
quiet() { "$@" 2>&1 | { grep -v "^WARNING: Location '" || true; }; return "${PIPESTATUS[0]}"; }

quiet "${pip[@]}" install "torch==${torch_version}"
quiet "${pip[@]}" install -r deploy/python-requirements.txt
# --no-build-isolation: build with the scikit-build-core and pybind11 just
# installed, and reuse build/python/ between runs (pyproject.toml).
if [ -n "${TDSTORE_WHEEL:-}" ]; then
  # A wheel of deploy/build-wheel.sh (tests/run.sh): what users install.
  quiet "${pip[@]}" install --no-deps --force-reinstall "$TDSTORE_WHEEL"
else
  quiet "${pip[@]}" install --no-build-isolation --no-deps .
fi
"$venv/bin/python" - <<'PY'
import torch, tensordict, tdstore
print(f"python-env: torch {torch.__version__}, tensordict {tensordict.__version__}, tdstore {tdstore.__file__}")
PY

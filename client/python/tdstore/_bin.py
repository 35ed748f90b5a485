"""The console scripts ``tdstored`` and ``tdstore`` of a wheel built by
deploy/build-wheel.sh: each replaces the Python process with the binary
the wheel carries in ``tdstore/bin/`` (``os.execv``: signals reach the
binary itself, and its exit status is the command's). tdstored finds the
``redis-server`` beside it for its embedded default."""

from __future__ import annotations

import os
import sys

BIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _exec(name: str) -> None:
    path = os.path.join(BIN_DIR, name)
    if not os.access(path, os.X_OK):
        sys.stderr.write(
            f"{name}: this tdstore install carries no {name} binary: a wheel built by "
            "deploy/build-wheel.sh does (`pip install .` builds the Python module only). "
            "Install that wheel, or build the binaries with deploy/build.sh.\n")
        raise SystemExit(127)
    os.execv(path, [name, *sys.argv[1:]])


def tdstored() -> None:
    _exec("tdstored")


def tdstore() -> None:
    _exec("tdstore")

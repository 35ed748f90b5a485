"""The wheel deploy/build-wheel.sh makes is the whole install: the console
scripts ``tdstored`` and ``tdstore`` run the binaries it carries and report
the package's version; tdstored's embedded default starts the redis-server
beside it with no flag; every library the package's binaries and native
module load comes from the wheel, so a machine without Debian's gRPC,
protobuf, abseil, hiredis and Redis runs it (checked in a mount namespace
that hides those files); and the wheel carries the licence texts of what it
bundles.

Runs where the installed tdstore is such a wheel; tests/run.sh installs one
and sets TDSTORE_TEST_WHEEL=1, and then a missing one fails the test."""

import importlib.metadata
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import tdstore

PACKAGE = Path(tdstore.__file__).parent
SCRIPTS = Path(sys.executable).parent
VERSION = importlib.metadata.version("tdstore")

if not (PACKAGE / "bin" / "tdstored").exists():
    if os.environ.get("TDSTORE_TEST_WHEEL") == "1":
        raise RuntimeError(f"TDSTORE_TEST_WHEEL=1 but {PACKAGE} is not installed from a wheel "
                           "of deploy/build-wheel.sh (no bin/tdstored)")
    pytest.skip("the installed tdstore is not a wheel of deploy/build-wheel.sh",
                allow_module_level=True)

# What a machine without the apt step lacks: hidden in the namespace test.
HIDDEN = ("libgrpc", "libgpr", "libupb", "libaddress_sorting", "libprotobuf", "libabsl_",
          "libhiredis", "libre2", "libcares")

# Starts tdstored through its console script with the embedded default (no
# --redis, no --redis-server-bin), makes a round trip from Python and from
# the CLI's console script, then stops it; prints what it checked.
SMOKE = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    import torch, tdstore
    scripts, sock = sys.argv[1], sys.argv[2]
    daemon = subprocess.Popen([os.path.join(scripts, "tdstored"), "--listen", "unix:" + sock],
                              stderr=subprocess.PIPE, text=True)
    try:
        addr = "unix:" + sock
        td = tdstore.TensorDictStore(batch_size=[4], addr=addr, retry_for=60)
        td["x"] = torch.arange(4.0)
        assert torch.equal(td["x"], torch.arange(4.0))
        ls = subprocess.run([os.path.join(scripts, "tdstore"), "--addr", addr, "ls"],
                            capture_output=True, text=True, check=True)
        assert td.name in ls.stdout, ls.stdout
        td.drop()
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err
    pid = int(err.split("started embedded redis-server (pid ")[1].split(")")[0])
    print("daemon", daemon.pid, "redis", pid)
""")


def _run_smoke(tmp_path, prefix=()):
    sock = tmp_path / "td.sock"
    out = subprocess.run([*prefix, sys.executable, "-c", SMOKE, str(SCRIPTS), str(sock)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_the_console_scripts_report_the_package_version():
    for name in ("tdstored", "tdstore"):
        out = subprocess.run([str(SCRIPTS / name), "--version"], capture_output=True, text=True,
                             timeout=60, check=True)
        assert out.stdout.strip() == f"{name} {VERSION}"


def test_tdstored_starts_the_redis_server_beside_it_and_serves(tmp_path):
    # The console script execs the binary: signals reach tdstored itself, and
    # the embedded redis-server is the wheel's (its /proc exe is in the
    # package), found without a flag.
    sock = tmp_path / "td.sock"
    daemon = subprocess.Popen([str(SCRIPTS / "tdstored"), "--listen", f"unix:{sock}"],
                              stderr=subprocess.PIPE, text=True)
    try:
        td = tdstore.TensorDictStore(batch_size=[3], addr=f"unix:{sock}", retry_for=60)
        assert os.readlink(f"/proc/{daemon.pid}/exe") == str(PACKAGE / "bin" / "tdstored")
        redis = [int(p) for p in os.listdir("/proc") if p.isdigit()
                 and _parent(int(p)) == daemon.pid]
        assert [os.readlink(f"/proc/{p}/exe") for p in redis] == [
            str(PACKAGE / "bin" / "redis-server")]
        td["v"] = torch.ones(3)
        assert torch.equal(td["v"], torch.ones(3))
        td.drop()
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


def test_every_library_the_package_loads_comes_from_the_wheel():
    elves = [PACKAGE / "bin" / n for n in ("tdstored", "tdstore", "redis-server")]
    elves += list(PACKAGE.glob("_native*.so"))
    libs_dir = os.path.realpath(PACKAGE.parent / "tdstore.libs")
    for elf in elves:
        out = subprocess.run(["ldd", str(elf)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            name, _, where = line.strip().partition(" => ")
            if any(name.startswith(h) for h in HIDDEN + ("libssl", "libcrypto")):
                path = os.path.realpath(where.split(" (")[0])
                assert os.path.dirname(path) == libs_dir, (elf.name, line)


def test_it_runs_where_debians_grpc_protobuf_abseil_hiredis_and_redis_are_hidden(tmp_path):
    """In a mount namespace, each of those files is covered by /dev/null:
    anything that still loaded one would fail."""
    lib_dir = Path("/usr/lib/x86_64-linux-gnu")
    hidden = [p for p in lib_dir.iterdir() if p.name.startswith(HIDDEN)]
    hidden += [Path(p) for p in ("/usr/bin/redis-server", "/usr/bin/redis-check-rdb",
                                 "/usr/bin/redis-check-aof") if os.path.exists(p)]
    assert len(hidden) > 20, "the system's gRPC and abseil libraries were not found"
    mounts = " && ".join(f"mount --bind /dev/null {p}" for p in hidden)
    script = tmp_path / "hide.sh"
    script.write_text(f'{mounts} && exec "$@"\n')
    prefix = ["unshare", "-m", "--propagation", "private", "sh", str(script)]
    probe = subprocess.run([*prefix, "sh", "-c", "redis-server --version"], capture_output=True)
    assert probe.returncode != 0, "the namespace did not hide the system's redis-server"
    assert "daemon" in _run_smoke(tmp_path, prefix)


def test_the_wheel_carries_the_licences_of_what_it_bundles():
    licenses = PACKAGE / "licenses"
    readme = (licenses / "README").read_text()
    names = {p.name for p in licenses.iterdir()}
    for bundled in ("redis-server", "libgrpc++", "libprotobuf", "libabsl", "libhiredis"):
        assert bundled in readme, bundled
    for line in readme.splitlines()[2:]:
        file, _, pkg = line.strip().partition(": ")
        assert f"{pkg}.copyright" in names, line
    assert "tdstore.LICENSE" in names

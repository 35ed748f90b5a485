"""The wheel deploy/build-wheel.sh makes is the whole install: the console
scripts ``tdstored`` and ``tdstore`` run the binaries it carries and report
the package's version; tdstored's embedded default starts the redis-server
beside it with no flag; its tag is manylinux_2_35 and every library its
binaries, native module and bundled libraries load is its own or the base
system's (glibc, libstdc++, libgcc, libm, zlib); so a machine without
Debian's gRPC, protobuf, abseil, hiredis and Redis runs it: the README's
Python example, the CLI and a part of the Python suite run in a mount
namespace that hides those files; and it carries the licence texts of what
it bundles.

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
# --redis, no --redis-server-bin), runs the README's Python example against
# it and lists its dicts with the CLI's console script, then stops it.
SMOKE = textwrap.dedent("""
    import os, re, signal, socket, subprocess, sys
    scripts, readme = sys.argv[1], sys.argv[2]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        addr = "127.0.0.1:%d" % s.getsockname()[1]
    daemon = subprocess.Popen([os.path.join(scripts, "tdstored"), "--listen", addr],
                              stderr=subprocess.PIPE, text=True)
    try:
        import tdstore
        tdstore.Client(addr, retry_for=60).list()  # waits until it serves
        text = open(readme).read()
        example = text.split("## Python example", 1)[1].split("```python", 1)[1]
        example = example.split("```", 1)[0].replace("127.0.0.1:50051", addr)
        exec(compile(example, "README.md (Python example)", "exec"), {})
        ls = subprocess.run([os.path.join(scripts, "tdstore"), "--addr", addr, "ls"],
                            capture_output=True, text=True, check=True)
        assert "replay" in ls.stdout, ls.stdout
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err
    assert "started embedded redis-server" in err, err
    print("README example ran")
""")

REPO = Path(__file__).resolve().parents[2]


def _run_smoke(prefix=()):
    out = subprocess.run([*prefix, sys.executable, "-c", SMOKE, str(SCRIPTS),
                          str(REPO / "README.md")], capture_output=True, text=True, timeout=300)
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


def test_it_runs_where_debians_grpc_protobuf_abseil_hiredis_and_redis_are_hidden(tmp_path):
    """In a mount namespace each of those files is covered by /dev/null, so
    anything that still loaded one would fail: the README's Python example
    and the CLI against the wheel's tdstored, then a subset of the Python
    suite with the wheel's tdstored and redis-server as its servers. (A
    namespace rather than a debootstrap chroot: it hides exactly the files
    the build used, costs nothing to make, and tests the very venv the rest
    of the suite runs in; docs/operations.md.)"""
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
    assert "README example ran" in _run_smoke(prefix)
    env = dict(os.environ, TDSTORE_TEST_BACKEND="standalone",
               TDSTORE_TDSTORED=str(PACKAGE / "bin" / "tdstored"),
               TDSTORE_REDIS_SERVER=str(PACKAGE / "bin" / "redis-server"))
    suite = subprocess.run(
        [*prefix, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/python/test_store.py", "tests/python/test_torchrl_contract.py",
         "tests/python/test_example.py::test_replay_trainer"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert suite.returncode == 0, suite.stdout[-4000:] + suite.stderr[-2000:]
    assert " passed" in suite.stdout and "failed" not in suite.stdout


def test_the_wheels_tag_is_manylinux_2_35_and_its_elves_need_only_the_base_libraries():
    wheel_file = Path(tdstore.__file__).parent.parent / f"tdstore-{VERSION}.dist-info" / "WHEEL"
    assert "Tag: cp311-cp311-manylinux_2_35_x86_64" in wheel_file.read_text().splitlines()
    base = ("linux-vdso.so", "ld-linux-x86-64.so", "libc.so", "libm.so", "libstdc++.so",
            "libgcc_s.so", "libz.so", "libdl.so", "libpthread.so", "librt.so")
    libs_dir = os.path.realpath(PACKAGE.parent / "tdstore.libs")
    elves = [PACKAGE / "bin" / n for n in ("tdstored", "tdstore", "redis-server")]
    elves += list(PACKAGE.glob("_native*.so")) + list(Path(libs_dir).iterdir())
    for elf in elves:
        out = subprocess.run(["ldd", str(elf)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            name, _, where = line.strip().partition(" => ")
            if name.split("/")[-1].startswith(base) or name == "statically linked":
                continue
            path = os.path.realpath(where.split(" (")[0])
            assert os.path.dirname(path) == libs_dir, (elf.name, line)


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

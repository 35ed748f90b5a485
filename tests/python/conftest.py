"""The Python suite's harness: real Redis, real Redis Cluster, real tdstored.

Session-scoped, started on first use and torn down at the end:

* ``standalone``: one redis-server on a free loopback port;
* ``cluster``: 3 masters + 3 replicas (``redis-cli --cluster create
  --cluster-replicas 1``), every node ``cluster_state:ok`` with 3 masters
  each holding one connected replica before any test runs;
* one tdstored per back end (``$TDSTORE_TDSTORED``, default
  ``<repo>/build/server/tdstored``), ready when it writes ``--ready-file``
  (redis-server: ``$TDSTORE_REDIS_SERVER`` or PATH; redis-cli beside it).

Tests ask for ``addr`` (parametrized over both back ends) or ``client`` /
``new_store``. A server that cannot start FAILS the tests that need it, with
its log: nothing here skips.

``$TDSTORE_TEST_TRANSPORT=unix`` serves every tdstored on a unix socket as
well and gives the tests its ``unix://`` address: the client then lends
tdstored shared memory and big calls move their bytes through it
(docs/protocol.md, *Same-host data path*), so the whole suite checks that
path too. ``shm_addr`` is such an address in either transport.

The ``tdstore`` package is imported from the environment (``pip install .``)
or, failing that, from ``<repo>/client/python`` with its built ``_native``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TDSTORED = os.environ.get("TDSTORE_TDSTORED", str(REPO / "build" / "server" / "tdstored"))
BACKENDS = ["standalone", "cluster"]
TRANSPORT = os.environ.get("TDSTORE_TEST_TRANSPORT", "tcp")
if TRANSPORT not in ("tcp", "unix"):
    raise RuntimeError(f"TDSTORE_TEST_TRANSPORT={TRANSPORT!r}: expected tcp or unix")
REDIS_SERVER = os.environ.get("TDSTORE_REDIS_SERVER") or shutil.which("redis-server") or "redis-server"
# redis-cli next to that redis-server if there is one, else from PATH.
_cli = Path(REDIS_SERVER).with_name("redis-cli")
REDIS_CLI = os.environ.get("TDSTORE_REDIS_CLI") or (str(_cli) if _cli.exists() else "redis-cli")

try:
    import tdstore  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "client" / "python"))
    import tdstore  # noqa: F401  (fails loudly if the native module is not built)

import redis  # redis-py, only to watch the test Redis servers come up


class StartError(RuntimeError):
    pass


def _free_port(taken: set) -> int:
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in taken:
            taken.add(port)
            return port
    raise StartError("no free TCP port")


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


class Processes:
    """Children this harness started; stop() ends exactly those."""

    def __init__(self):
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def spawn(self, args, log: Path) -> subprocess.Popen:
        with open(log, "ab") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        self.procs.append((proc, log))
        return proc

    def stop(self):
        for proc, _ in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc, _ in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()


def _wait_redis(proc, port: int, log: Path, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StartError(f"redis-server on port {port} exited ({proc.returncode}):\n"
                             f"{_tail(log)}")
        try:
            info = redis.Redis(port=port, socket_timeout=1).info("server")
            if info.get("process_id") == proc.pid:  # it is ours, not a port thief
                return
        except redis.exceptions.ConnectionError:
            pass
        time.sleep(0.02)
    raise StartError(f"redis-server on port {port} did not answer in {timeout} s:\n{_tail(log)}")


def _redis_args(port: int, directory: Path, log: Path, extra=()):
    return [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(directory), "--logfile", str(log),
            "--daemonize", "no", "--protected-mode", "no", *extra]


def start_standalone(procs: Processes, base: Path) -> str:
    """A redis-server; returns tdstored's --redis URL."""
    directory = base / "redis"
    directory.mkdir()
    log = directory / "redis.log"
    port = _free_port(set())
    proc = procs.spawn(_redis_args(port, directory, log), log)
    _wait_redis(proc, port, log)
    return f"redis://127.0.0.1:{port}"


def _cluster_problem(ports) -> str:
    masters = 0
    for port in ports:
        r = redis.Redis(port=port, socket_timeout=2)
        info = r.execute_command("CLUSTER INFO")
        if isinstance(info, dict):  # redis-py parses it (values may be ints)
            fields = {str(k): str(v) for k, v in info.items()}
        else:
            if isinstance(info, bytes):
                info = info.decode()
            fields = dict(line.split(":", 1) for line in str(info).split() if ":" in line)
        if fields.get("cluster_state") != "ok":
            return f"{port}: cluster_state:{fields.get('cluster_state')}"
        if fields.get("cluster_known_nodes") != str(len(ports)):
            return f"{port}: cluster_known_nodes:{fields.get('cluster_known_nodes')}"
        repl = r.info("replication")
        if repl.get("role") == "master":
            masters += 1
            if repl.get("connected_slaves") != 1:
                return f"{port}: connected_slaves:{repl.get('connected_slaves')}"
    return "" if masters == 3 else f"{masters} masters"


def start_cluster(procs: Processes, base: Path) -> str:
    """3 masters + 3 replicas; returns tdstored's --redis URL."""
    taken: set = set()
    ports = []
    started = []
    for i in range(6):
        directory = base / f"cluster-{i}"
        directory.mkdir()
        log = directory / "redis.log"
        port, bus = _free_port(taken), _free_port(taken)
        extra = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                 "--cluster-node-timeout", "5000", "--cluster-port", str(bus),
                 "--repl-diskless-sync-delay", "0"]
        started.append((procs.spawn(_redis_args(port, directory, log, extra), log), port, log))
        ports.append(port)
    for proc, port, log in started:
        _wait_redis(proc, port, log)
    create = subprocess.run(
        [REDIS_CLI, "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
         "--cluster-replicas", "1", "--cluster-yes"],
        capture_output=True, text=True, timeout=60)
    if create.returncode != 0:
        raise StartError(f"redis-cli --cluster create failed:\n{create.stdout}\n{create.stderr}")
    deadline = time.monotonic() + 30
    problem = "not checked"
    while time.monotonic() < deadline:
        problem = _cluster_problem(ports)
        if not problem:
            break
        time.sleep(0.05)
    if problem:
        raise StartError(f"the Redis Cluster did not come up in 30 s: {problem}")
    return "redis-cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports[:3])


def start_tdstored(procs: Processes, base: Path, redis_url: str, extra=(),
                   name: str = "tdstored", transport: str | None = None) -> str:
    """tdstored on a free port over ``redis_url`` (and, for ``transport``
    unix, on a unix socket beside its log); returns the transport's
    address."""
    if not os.access(TDSTORED, os.X_OK):
        raise StartError(f"tdstored not found at {TDSTORED} (build it, or set $TDSTORE_TDSTORED)")
    directory = base / name
    directory.mkdir()
    log = directory / "tdstored.log"
    ready = directory / "ready"
    port = _free_port(set())
    unix = (transport or TRANSPORT) == "unix"
    sock = directory / "td.sock"
    if unix:
        extra = ["--unix-socket", str(sock), *extra]
    proc = procs.spawn([TDSTORED, "--listen", f"127.0.0.1:{port}", "--redis", redis_url,
                        "--ready-file", str(ready), "--log-level", "warning", *extra], log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StartError(f"tdstored exited ({proc.returncode}):\n{_tail(log)}")
        if ready.exists() and ready.read_text().strip():
            return f"unix://{sock}" if unix else f"127.0.0.1:{port}"
        time.sleep(0.02)
    raise StartError(f"tdstored did not become ready in 30 s:\n{_tail(log)}")


@pytest.fixture(scope="session")
def _procs():
    procs = Processes()
    yield procs
    procs.stop()


REDIS_URLS: dict = {}  # back end -> the --redis URL its tdstored uses
ADDRS: dict = {}  # back end -> its tdstored's address


def _backend(kind, procs, tmp_path_factory):
    base = tmp_path_factory.mktemp(kind)
    try:
        url = start_standalone(procs, base) if kind == "standalone" else start_cluster(procs, base)
        REDIS_URLS[kind] = url
        ADDRS[kind] = start_tdstored(procs, base, url)
        return ADDRS[kind]
    except (StartError, OSError, subprocess.SubprocessError, redis.exceptions.RedisError) as err:
        pytest.fail(f"cannot start the {kind} back end: {err}", pytrace=False)


@pytest.fixture(scope="session")
def standalone_addr(_procs, tmp_path_factory) -> str:
    return _backend("standalone", _procs, tmp_path_factory)


@pytest.fixture(scope="session")
def cluster_addr(_procs, tmp_path_factory) -> str:
    return _backend("cluster", _procs, tmp_path_factory)


@pytest.fixture(scope="session")
def standalone_redis_port(standalone_addr) -> int:
    """The port of the standalone back end's redis-server (for the seed, over redis-py)."""
    return int(REDIS_URLS["standalone"].rsplit(":", 1)[1])


@pytest.fixture(scope="session", params=BACKENDS)
def addr(request) -> str:
    """tdstored's address, once per back end."""
    return request.getfixturevalue(f"{request.param}_addr")


from _helpers import TOKENS  # noqa: E402


@pytest.fixture(scope="session")
def tokens_addr(addr, _procs, tmp_path_factory) -> str:
    """A second tdstored on the same back end that requires tokens: TOKENS["rw"]
    may write dicts named py-auth-*, TOKENS["ro"] may only read them."""
    kind = next(k for k, a in ADDRS.items() if a == addr)
    base = tmp_path_factory.mktemp(f"tokens-{kind}")
    tokens = base / "tokens"
    tokens.write_text(f"{TOKENS['rw']} rw py-auth-\n{TOKENS['ro']} ro py-auth-\n")
    try:
        return start_tdstored(_procs, base, REDIS_URLS[kind],
                              ["--tokens-file", str(tokens)], name="tdstored-tokens")
    except (StartError, OSError) as err:
        pytest.fail(f"cannot start tdstored with tokens: {err}", pytrace=False)


@pytest.fixture(scope="session")
def shm_addr(addr, _procs, tmp_path_factory) -> str:
    """A ``unix://`` address of a tdstored on ``addr``'s back end, which a
    client lends shared memory: ``addr`` itself with
    $TDSTORE_TEST_TRANSPORT=unix, else a second tdstored on a unix socket."""
    if addr.startswith("unix:"):
        return addr
    return _unix_tdstored(addr, _procs, tmp_path_factory, "shm")


@pytest.fixture(scope="module")
def fresh_shm_addr(addr, _procs, tmp_path_factory) -> str:
    """A ``unix://`` address of a tdstored of its own, on ``addr``'s back
    end, for a module whose tests count on lending: no other test's clients
    hold part of its --shm-max-bytes (a client kept alive by a reference
    cycle keeps its region lent until the garbage collector runs)."""
    return _unix_tdstored(addr, _procs, tmp_path_factory, "fresh-shm")


def _unix_tdstored(addr, procs, tmp_path_factory, label: str) -> str:
    """Starts a tdstored on a unix socket over ``addr``'s back end; its
    address. The test fails if it cannot start."""
    kind = next(k for k, a in ADDRS.items() if a == addr)
    base = tmp_path_factory.mktemp(f"{label}-{kind}")
    try:
        return start_tdstored(procs, base, REDIS_URLS[kind], name=f"tdstored-{label}",
                              transport="unix")
    except (StartError, OSError) as err:
        pytest.fail(f"cannot start tdstored on a unix socket: {err}", pytrace=False)


@pytest.fixture
def client(addr):
    import tdstore

    return tdstore.Client(addr)


@pytest.fixture
def new_store(client):
    """new_store(batch_size, **kw) -> a fresh TensorDictStore, dropped after the test."""
    import tdstore

    made = []

    def make(batch_size=(), **kwargs):
        td = tdstore.TensorDictStore(batch_size=batch_size, client=client, **kwargs)
        made.append(td.name)
        return td

    yield make
    for name in made:
        try:
            client.drop(name)
        except KeyError:
            pass  # the test dropped it


@pytest.fixture
def tdstored_bin() -> str:
    return TDSTORED


def pytest_report_header(config):
    return [f"tdstored: {TDSTORED}", f"redis-server: {REDIS_SERVER}", f"redis-cli: {REDIS_CLI}",
            f"transport: {TRANSPORT}"]


# $TDSTORE_TEST_BACKEND=standalone|cluster runs one back end's share of the
# suite (ctest runs the two shares side by side; unset runs both). A test
# parametrized over ``addr`` belongs to its back end; one that asks for
# ``cluster_addr`` (alone or beside ``standalone_addr``) to the cluster's
# share; every other test to the standalone share, so each runs exactly once.
SHARE = os.environ.get("TDSTORE_TEST_BACKEND", "")
if SHARE and SHARE not in BACKENDS:
    raise pytest.UsageError(f"TDSTORE_TEST_BACKEND={SHARE!r}: expected one of {BACKENDS}")


def _share(item) -> str:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "addr" in callspec.params:
        return callspec.params["addr"]
    return "cluster" if "cluster_addr" in getattr(item, "fixturenames", ()) else "standalone"


def pytest_collection_modifyitems(config, items):
    if not SHARE:
        return
    kept = [item for item in items if _share(item) == SHARE]
    dropped = [item for item in items if _share(item) != SHARE]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept

"""The same-host data path through Python (docs/protocol.md, *Same-host data
path*): on a ``unix://`` address the client lends tdstored a memfd region
and big calls move their bytes through it. What it gives must be what
tensordict gives and what the socket gives, from any number of threads.
(The whole suite runs over this path too with
$TDSTORE_TEST_TRANSPORT=unix; faults are tested in
tests/e2e/shared_memory_test.cc.)"""

import random
import threading
import urllib.request
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

import conftest
import tdstore
from tdstore import TensorDictStore

from _helpers import assert_td_equal, random_index


def test_a_unix_client_shares_memory_unless_told_not_to(addr, fresh_shm_addr):
    # A tdstored no other test lent to: whether a client lends must not
    # depend on what earlier tests left lent (tdstored refuses lending past
    # --shm-max-bytes, and the client then uses the socket).
    assert tdstore.Client(fresh_shm_addr).shares_memory()
    assert not tdstore.Client(fresh_shm_addr, shared_memory_bytes=0).shares_memory()
    if not addr.startswith("unix:"):
        # A tdstored without a unix socket offers no shared memory.
        assert not tdstore.Client(addr).shares_memory()
    with pytest.raises(TypeError, match="unknown tdstore client option"):
        tdstore.Client(fresh_shm_addr, shared_memory=True)


def _loopback_beside(unix_addr: str) -> str:
    """The loopback TCP address of the tdstored serving ``unix_addr`` (its
    --ready-file, beside its socket, lists both)."""
    ready = Path(unix_addr[len("unix://"):]).with_name("ready").read_text().split()
    return next(a for a in ready if not a.startswith("unix:"))


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_loopback_tcp_client_lends_memory_and_reads_what_it_wrote(fresh_shm_addr, host):
    # The default address (127.0.0.1:50051) is a same-host client's: it
    # lends as a unix-socket client does (docs/protocol.md, *Same-host data
    # path*), and a client that keeps every byte on the socket reads the
    # same.
    tcp = host + ":" + _loopback_beside(fresh_shm_addr).rsplit(":", 1)[1]
    client = tdstore.Client(tcp)
    assert client.shares_memory()
    rng = random.Random(host)
    gen = torch.Generator().manual_seed(len(host))
    for n in (3, 700, 9000):  # inline bytes; a span of the region; several
        local = _random_td(n, gen)
        td = TensorDictStore.from_dict(local, client=client)
        try:
            assert_td_equal(td.to_tensordict(), local)
            for _ in range(5):
                index = random_index(rng, n)
                got = td[index]
                got = got.to_tensordict() if hasattr(got, "to_tensordict") else got
                assert_td_equal(got, local[index])
                value = _random_td(n, gen)[index]
                td[index] = value
                local[index] = value
            _assert_the_socket_reads(td, local, tcp)
        finally:
            td.drop()
    assert client.shares_memory()


@pytest.fixture(scope="module")
def metered_shm_addr(addr, _procs, tmp_path_factory):
    """A tdstored of its own on a unix socket, as ``fresh_shm_addr``, with
    its Prometheus /metrics: (its address, ``calls(method)``: how many
    calls of that method it has answered OK). A call is counted before its
    status is sent, so a call that returned is counted."""
    kind = next(k for k, a in conftest.ADDRS.items() if a == addr)
    port = conftest._free_port(set())
    base = tmp_path_factory.mktemp(f"metered-shm-{kind}")
    try:
        address = conftest.start_tdstored(
            _procs, base, conftest.REDIS_URLS[kind], name="tdstored-metered-shm",
            transport="unix", extra=["--metrics-listen", f"127.0.0.1:{port}"])
    except (conftest.StartError, OSError) as err:
        pytest.fail(f"cannot start tdstored with metrics: {err}", pytrace=False)

    def calls(method: str) -> float:
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            text = reply.read().decode()
        series = f'method="tdstore.v1.TdStore/{method}"'
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("tdstore_rpc_calls_total{") and series in line
                   and 'code="OK"' in line)

    return address, calls


def _in_threads(work, n=4):
    """Runs ``work(t, errors)`` in ``n`` threads at once; returns ``errors``:
    what they appended, and what any of them raised (not lost in a thread)."""
    errors = []

    def run(t):
        try:
            work(t, errors)
        except BaseException as err:  # report, don't lose it in the thread
            errors.append((t, repr(err)))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def _assert_the_socket_reads(td, mirror, addr):
    """What went through shared memory is what a client of the socket reads."""
    socket = TensorDictStore.from_store(td.name, client=tdstore.Client(
        addr, shared_memory_bytes=0))
    assert_td_equal(socket.to_tensordict(), mirror)


def _random_td(n, gen):
    return TensorDict({
        "obs": torch.randn(n, 64, generator=gen),
        "act": torch.randint(-9, 9, (n, 4), generator=gen),
        "next": {"obs": torch.randn(n, 64, generator=gen)},
        "done": torch.rand(n, 1, generator=gen) < 0.5,
    }, batch_size=[n])


@pytest.mark.parametrize("seed", range(4))
def test_random_reads_and_writes_through_shared_memory_match_tensordict(fresh_shm_addr, seed):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    n = rng.randrange(1000, 4000)  # obs: 256 KiB to 1 MiB per leaf
    client = tdstore.Client(fresh_shm_addr)
    assert client.shares_memory()
    mirror = _random_td(n, gen)
    td = TensorDictStore.from_dict(mirror, client=client)
    try:
        for step in range(30):
            op = rng.choice(["set", "setitem", "getitem", "get", "all"])
            where = f"seed {seed} step {step} {op}"
            if op == "set":
                key = rng.choice(["obs", ("next", "obs"), "act"])
                value = _random_td(n, gen)[key]
                td[key] = value
                mirror[key] = value
            elif op == "setitem":
                index = random_index(rng, n)
                value = _random_td(n, gen)[index]
                td[index] = value
                mirror[index] = value
            elif op == "getitem":
                index = random_index(rng, n)
                got = td[index]
                got = got.to_tensordict() if hasattr(got, "to_tensordict") else got
                assert_td_equal(got, mirror[index])
            elif op == "get":
                key = rng.choice(["obs", ("next", "obs"), "act", "done"])
                assert torch.equal(td[key], mirror[key]), where
            else:
                assert_td_equal(td.to_tensordict(), mirror), where
        _assert_the_socket_reads(td, mirror, fresh_shm_addr)
    finally:
        td.drop()


@pytest.mark.parametrize("seed", range(3))
def test_writes_larger_than_the_region_stream_through_it(fresh_shm_addr, seed):
    # A 2 MiB region and writes of up to 24 MiB: each streams through a ring
    # of the region's spans (WriteLeavesShared), reused within the call.
    # Whole leaves and rows at random positions, against a TensorDict, and
    # read back over the socket as well.
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    n = rng.randrange(3000, 12000)
    client = tdstore.Client(fresh_shm_addr, shared_memory_bytes=2 << 20)
    assert client.shares_memory()
    mirror = TensorDict({
        "wide": torch.randn(n, rng.randrange(200, 500), generator=gen),
        "ints": torch.randint(-2**40, 2**40, (n, rng.randrange(1, 70)), generator=gen),
        "nest": {"half": torch.randn(n, 33, generator=gen).half()},
    }, batch_size=[n])
    td = TensorDictStore(batch_size=[n], client=client)
    try:
        td.update(mirror)
        for step in range(6):
            key = rng.choice(["wide", "ints", ("nest", "half")])
            if rng.random() < 0.5:
                value = torch.randn_like(mirror[key].float(), generator=gen).to(mirror[key].dtype)
                td[key] = value
                mirror[key] = value
            else:
                index = torch.randperm(n, generator=gen)[: rng.randrange(n // 2, n)]
                rows = mirror[index].apply(lambda t: torch.randn_like(t.float()).to(t.dtype))
                td[index] = rows
                mirror[index] = rows
            assert torch.equal(td[key], mirror[key]), f"seed {seed} step {step} {key}"
        _assert_the_socket_reads(td, mirror, fresh_shm_addr)
    finally:
        td.drop()


@pytest.mark.parametrize("seed", range(3))
def test_reads_larger_than_the_region_stream_through_it(metered_shm_addr, seed):
    # Written over the socket, read through a 2 MiB region: a read larger
    # than the span it offers (1 MiB) streams through a ring cut from it
    # (ReadLeavesShared, counted by tdstored's metrics), one that fits is
    # one ReadLeaves. Leaves of several dtypes, whole, nested, all at once,
    # rows by an index, and from four threads at once, against a TensorDict.
    fresh_shm_addr, calls = metered_shm_addr
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    n = rng.randrange(3000, 12000)
    mirror = TensorDict({
        "wide": torch.randn(n, rng.randrange(200, 500), generator=gen),
        "ints": torch.randint(-2**40, 2**40, (n, rng.randrange(1, 70)), generator=gen),
        "small": torch.randn(n, 3, generator=gen),
        "nest": {"half": torch.randn(n, 33, generator=gen).half(),
                 "flags": torch.rand(n, rng.randrange(100, 400), generator=gen) < 0.5},
    }, batch_size=[n])
    writer = tdstore.Client(fresh_shm_addr, shared_memory_bytes=0)
    client = tdstore.Client(fresh_shm_addr, shared_memory_bytes=2 << 20)
    assert client.shares_memory()
    TensorDictStore.from_dict(mirror, client=writer, name=f"read-ring-{seed}-{n}")
    td = TensorDictStore.from_store(f"read-ring-{seed}-{n}", client=client)
    try:
        # "wide" is at least 3000 x 200 x 4 bytes, past the span; "small" at
        # most 12000 x 3 x 4, within it.
        for key, ringed in [("wide", True), ("small", False), (None, True)]:
            shared, plain = calls("ReadLeavesShared"), calls("ReadLeaves")
            if key is None:
                assert_td_equal(td.to_tensordict(), mirror)
            else:
                assert torch.equal(td[key], mirror[key]), f"seed {seed} {key}"
            assert (calls("ReadLeavesShared") - shared, calls("ReadLeaves") - plain) == (
                (1, 0) if ringed else (0, 1)), f"seed {seed} {key}"
        for key in ["wide", "ints", "small", ("nest", "half"), ("nest", "flags")]:
            assert torch.equal(td[key], mirror[key]), f"seed {seed} {key}"
        assert_td_equal(td["nest"].to_tensordict(), mirror["nest"])
        assert_td_equal(td.to_tensordict(), mirror)
        # Rows by one index, as a DataLoader batch reads them: positions, a
        # slice, a mask, most of them larger than the span.
        for index in [torch.randint(0, n, (rng.randrange(1, n),), generator=gen),
                      slice(rng.randrange(0, 50), None, rng.randrange(1, 4)),
                      torch.rand(n, generator=gen) < 0.7]:
            assert_td_equal(td[index], mirror[index])

        def work(t, errors):
            for i in range(4):
                key = ["wide", "ints", ("nest", "flags"), ("nest", "half")][(t + i) % 4]
                if not torch.equal(td[key], mirror[key]):
                    errors.append((t, i, key))

        assert _in_threads(work) == []
    finally:
        td.drop()


def test_threads_sharing_one_region_each_get_their_own_bytes(fresh_shm_addr):
    # One client, one region: concurrent calls take spans of it side by side
    # (or the socket when it is full), and none sees another's bytes.
    client = tdstore.Client(fresh_shm_addr, shared_memory_bytes=4 << 20)
    rows = 64  # 1 MiB per leaf: the 4 MiB region holds three or four at once
    td = TensorDictStore(batch_size=[rows], client=client)

    def work(t, errors):
        for i in range(15):
            value = torch.full((rows, 4096), float(t * 100 + i))
            td[f"t{t}"] = value
            got = td[f"t{t}"]
            if not torch.equal(got, value):
                errors.append((t, i, got.unique().tolist()))

    try:
        assert client.shares_memory()
        assert _in_threads(work, 6) == []
        for t in range(6):
            assert torch.equal(td[f"t{t}"], torch.full((rows, 4096), float(t * 100 + 14)))
    finally:
        td.drop()


def test_threads_writing_more_than_the_region_each_stream_their_own_bytes(fresh_shm_addr):
    # One 4 MiB region, four threads each writing 6 MiB leaves: every write
    # is larger than the region, so each takes a ring of it (up to half the
    # region) while the others hold theirs, or the socket when none is
    # free. Each thread's value is distinct in every element, so bytes of
    # another write, or of an earlier chunk left in a slot, would show.
    client = tdstore.Client(fresh_shm_addr, shared_memory_bytes=4 << 20)
    rows = 384  # [384, 4096] f32 = 6 MiB
    td = TensorDictStore(batch_size=[rows], client=client)

    def work(t, errors):
        for i in range(6):
            value = torch.arange(rows * 4096, dtype=torch.float32).reshape(rows, 4096)
            value += t * 1e7 + i * 1e5
            td[f"t{t}"] = value
            got = td[f"t{t}"]
            if not torch.equal(got, value):
                errors.append((t, i, (got != value).sum().item()))

    try:
        assert client.shares_memory()
        assert _in_threads(work) == []
    finally:
        td.drop()

"""Extends that return before tdstored applies them (TdStoreStorage's
``write_behind``, the client core's write_counted_behind), on real tdstored
and Redis: a buffer holds what torchrl's LazyTensorStorage holds after the
same extends and samples; another process never sees the length count a
row not yet written; a failure is raised by the next call, once."""

import time
import uuid

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers import RandomSampler, RoundRobinWriter

import tdstore
from tdstore import TensorDictStore
from tdstore.torchrl import TdStoreStorage
from _helpers import worker_context

WRITTEN = "tdstore.rb.written"


def rows(start: int, n: int, dtype=torch.float32) -> TensorDict:
    ids = torch.arange(start, start + n)
    return TensorDict({"id": ids + 1, "obs": (ids[:, None] + 1).to(dtype).expand(n, 5).clone(),
                       "nested": {"done": ids % 3 == 0}}, [n])


def buffer(storage, seed=0):
    return ReplayBuffer(storage=storage, sampler=RandomSampler(), writer=RoundRobinWriter(),
                        batch_size=16)


@pytest.fixture
def went_behind(monkeypatch):
    """What each counted write of TensorDictStore returned (None: behind)."""
    results = []
    real = TensorDictStore._set_counted

    def spy(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        results.append(out)
        return out

    monkeypatch.setattr(TensorDictStore, "_set_counted", spy)
    return results


def test_extends_behind_hold_what_lazy_tensor_storage_holds(addr, went_behind):
    g = torch.Generator().manual_seed(3)
    behind = TdStoreStorage(100, addr=addr, length_ttl=0)
    at_once = TdStoreStorage(100, addr=addr, length_ttl=0, write_behind=False)
    lazy = LazyTensorStorage(100)
    buffers = [buffer(s) for s in (behind, at_once, lazy)]
    try:
        start = 0
        for step in range(30):  # wraps around 100 rows several times
            n = int(torch.randint(1, 40, (), generator=g))
            data = rows(start, n)
            indices = [rb.extend(data) for rb in buffers]
            for other in indices[1:]:
                assert torch.equal(torch.as_tensor(indices[0]), torch.as_tensor(other))
            start += n
            if step % 4 == 1:
                # A sample's reads wait for this process's writes behind.
                want = lazy.get(torch.arange(len(lazy)))
                for s in (behind, at_once):
                    assert len(s) == len(lazy)
                    got = s.get(torch.arange(len(lazy)))
                    for key in want.keys(True, True):
                        assert torch.equal(got[key], want[key]), (step, key)
                assert buffers[0].sample().batch_size == torch.Size([16])
        assert sum(r is None for r in went_behind) >= 29, went_behind[:6]
        # Another client sees every row once the writer settled.
        behind._settle()
        seen = TensorDictStore.from_store(behind.name, addr=addr)
        want = lazy.get(torch.arange(100))
        got = seen[:]
        for key in want.keys(True, True):
            assert torch.equal(got[key], want[key]), key
        assert seen.counter_get(WRITTEN) == start
    finally:
        for s in (behind, at_once):
            s.store.drop()


def test_extends_queued_together_land_as_lazy_tensor_storage_applies_them(addr):
    """Many extends and adds with no read between them: the writer thread
    finds them waiting and sends consecutive ones as one call where no row
    is in two of them (rows_behind.h). The buffer wraps every few extends,
    so some queued writes share rows: those must land in order, the later
    winning. Random sizes, against LazyTensorStorage, three seeds."""
    for seed in range(3):
        g = torch.Generator().manual_seed(100 + seed)
        behind = TdStoreStorage(50, addr=addr, length_ttl=0)
        lazy = LazyTensorStorage(50)
        buffers = [buffer(s) for s in (behind, lazy)]
        try:
            start = 0
            for _ in range(80):
                if int(torch.randint(0, 5, (), generator=g)) == 0:
                    row = rows(start, 1)[0]  # torchrl's add: one row at an int cursor
                    indices = [rb.add(row) for rb in buffers]
                    start += 1
                else:
                    n = int(torch.randint(1, 30, (), generator=g))
                    indices = [rb.extend(rows(start, n)) for rb in buffers]
                    start += n
                assert torch.equal(torch.as_tensor(indices[0]), torch.as_tensor(indices[1]))
            assert len(behind) == len(lazy) == 50
            want = lazy.get(torch.arange(50))
            got = behind.get(torch.arange(50))
            for key in want.keys(True, True):
                assert torch.equal(got[key], want[key]), (seed, key)
            assert behind.store.counter_get(WRITTEN) == start
            # Another client reads the same rows.
            seen = TensorDictStore.from_store(behind.name, addr=addr)[:]
            for key in want.keys(True, True):
                assert torch.equal(seen[key], want[key]), (seed, key)
        finally:
            behind.store.drop()


def _poll_reader(name, addr, expected, queue, go):
    """Reads the length and then the rows under it, until all ``expected``
    rows are counted: every counted row must hold its data (ids are never 0).
    Says "ready" once it has read once, and waits for ``go``: the writer
    starts only then, so the reads overlap the writes."""
    try:
        store = TensorDictStore.from_store(name, addr=addr)
        store.counter_get(WRITTEN)
        queue.put("ready")
        go.wait(60)
        reads = 0
        give_up = time.monotonic() + 90  # the test fails then, never hangs
        while time.monotonic() < give_up:
            n = min(store.counter_get(WRITTEN), store.batch_size[0])
            if n:
                ids = store[:n]["id"] if n < store.batch_size[0] else store["id"]
                zero = (ids == 0).nonzero().flatten().tolist()
                if zero:
                    queue.put(f"rows {zero[:5]} counted (length {n}) before written")
                    return
            reads += 1
            if n >= expected:
                queue.put(f"ok {reads}")
                return
        queue.put(f"only {n} of {expected} rows counted after 90 s")
    except BaseException as e:  # noqa: BLE001  (reported to the test)
        queue.put(f"{type(e).__name__}: {e}")


def test_another_process_never_sees_rows_counted_before_they_are_written(addr):
    name = f"rb-behind-{uuid.uuid4().hex}"
    storage = TdStoreStorage(5000, name=name, addr=addr)
    rb = buffer(storage)
    g = torch.Generator().manual_seed(5)
    try:
        rb.extend(rows(0, 10))  # makes the dict before the reader opens it
        storage._settle()
        ctx = worker_context()
        queue, go = ctx.Queue(), ctx.Event()
        reader = ctx.Process(target=_poll_reader, args=(name, addr, 4000, queue, go), daemon=True)
        reader.start()
        assert queue.get(timeout=120) == "ready"
        go.set()
        start = 10
        while start < 4000:
            n = min(int(torch.randint(1, 120, (), generator=g)), 4000 - start)
            rb.extend(rows(start, n))
            start += n
        storage._settle()
        reader.join(120)
        assert reader.exitcode == 0
        answer = queue.get(timeout=5)
        assert answer.startswith("ok"), answer
    finally:
        TensorDictStore.from_store(name, addr=addr).drop()


def extend_failing_behind(storage, rb, went_behind):
    """10 rows extended and settled, then 5 more whose extend returns and
    then fails: the length counter is set one short of its maximum, so the
    rows are written and their count overflows (OUT_OF_RANGE), leaving the
    counter at 2**63 - 2. Returns the store."""
    rb.extend(rows(0, 10))
    storage._settle()
    store = storage.store
    store.counter_add(WRITTEN, 2**63 - 1 - 10 - 1)
    rb.extend(rows(10, 5))
    assert went_behind[-1] is None
    return store


def test_a_failed_write_behind_is_raised_by_the_next_call_once(addr, went_behind):
    storage = TdStoreStorage(50, addr=addr, length_ttl=0)
    rb = buffer(storage)
    try:
        store = extend_failing_behind(storage, rb, went_behind)
        with pytest.raises(tdstore.WriteBehindError, match="written behind") as raised:
            storage.get(torch.arange(5))
        # The write's own code, but none of the builtins a caller's own
        # "absent" or "out of range" handling catches.
        assert raised.value.code_name == "OUT_OF_RANGE" and raised.value.dropped == 0
        assert not isinstance(raised.value, (IndexError, KeyError, ValueError, RuntimeError))
        # Raised once: the buffer goes on, and its rows were written.
        assert torch.equal(storage.get(torch.arange(15))["id"], torch.arange(1, 16))
        store.counter_add(WRITTEN, -(2**63 - 2) + 15)  # the overflow left it unchanged
        rb.extend(rows(15, 5))
        assert went_behind[-1] is None
        assert store.counter_get(WRITTEN) == 20
        assert torch.equal(storage.get(torch.arange(20))["id"], torch.arange(1, 21))
    finally:
        storage.store.drop()


def test_a_failure_is_not_taken_for_the_next_calls_own_error(addr, went_behind):
    """The next call after a failed write behind is one that reads its own
    NOT_FOUND as "absent" (``get(key, default)``): the failure still comes
    out; the length after it is read, not guessed."""
    storage = TdStoreStorage(50, addr=addr, length_ttl=60)
    rb = buffer(storage)
    try:
        store = extend_failing_behind(storage, rb, went_behind)
        with pytest.raises(tdstore.WriteBehindError):
            store.get("no such key", None)
        assert store.get("no such key", None) is None
        # The length is read, not guessed from the failed write.
        store.counter_add(WRITTEN, -(2**63 - 2) + 15)
        assert len(rb) == 15
        rb.extend(rows(15, 5))
        assert len(rb) == 20
    finally:
        storage.store.drop()


def test_writes_that_change_the_schema_or_are_refused_are_not_behind(addr, went_behind):
    storage = TdStoreStorage(50, addr=addr)
    rb = buffer(storage)
    try:
        rb.extend(rows(0, 10))
        # A key the buffer lacks: written at once (tdstored creates the leaf).
        more = rows(10, 5)
        more["extra"] = torch.ones(5, 2)
        rb.extend(more)
        assert went_behind[-1] == 15
        assert torch.equal(storage.get(torch.arange(15))["extra"][10:], torch.ones(5, 2))
        # Rows that cannot join the buffer: refused at once, nothing written.
        bad = rows(15, 5)
        bad["obs"] = torch.ones(5, 6)
        with pytest.raises((RuntimeError, ValueError, IndexError)):
            rb.extend(bad)
        assert len(rb) == 15
        assert int(storage.store.counter_get(WRITTEN)) == 15
    finally:
        storage.store.drop()

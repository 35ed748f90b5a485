"""keys(), ``in`` and the schema a write needs, answered from a watched copy.

The client core keeps each dict's schema current over a WatchSchema stream
(docs/python.md, *Schema watch*), so these answer without a round trip. They
must still answer exactly what tensordict would: checked here against a local
TensorDict on random sequences of changes, and across processes.
"""

import random
import time

import pytest
import torch
from tensordict import TensorDict

import tdstore
from tdstore import TensorDictStore
from _helpers import worker_context

KEYS = ["a", "b", ("n", "x"), ("n", "y"), ("n", "m", "z"), ("o", "p")]
PROBES = KEYS + ["n", ("n", "m"), "o", "zz", ("a", "q"), ("n", "q")]


def _same_keys(store, local):
    for nested in (False, True):
        for leaves_only in (False, True):
            got = sorted(map(str, store.keys(nested, leaves_only)))
            want = sorted(map(str, local.keys(nested, leaves_only)))
            assert got == want, (nested, leaves_only, got, want)
        # Top-level names come as str, in name order, with len() agreeing
        # (list() asks len() for a size hint after iter()).
        names = list(store.keys(False, leaves_only, sort=True))
        assert names == sorted(local.keys(False, leaves_only)), names
        assert len(store.keys(False, leaves_only)) == len(names)
    for key in PROBES:
        assert (key in store) == (key in local), key


def _drop_empty_subdicts(local):
    # A store has no empty sub-dicts (a sub-dict is a prefix of some leaf's
    # path); tensordict keeps one after its last leaf is deleted.
    for key in sorted(local.keys(True), key=lambda k: len(k) if isinstance(k, tuple) else 1,
                      reverse=True):
        value = local.get(key)
        if isinstance(value, TensorDict) and not list(value.keys()):
            del local[key]


@pytest.mark.parametrize("watch", [True, False])
def test_keys_and_contains_follow_random_changes_like_a_tensordict(addr, watch):
    client = tdstore.Client(addr, watch_schemas=watch)
    n = 6
    store = TensorDictStore(batch_size=[n], client=client)
    local = TensorDict({}, batch_size=[n])
    rng = random.Random(99)
    try:
        for step in range(80):
            key = rng.choice(KEYS)
            kind = rng.random()
            value = torch.full((n, rng.randint(1, 3)), float(step))
            try:
                if kind < 0.45:
                    local[key] = value.clone()
                    store[key] = value
                elif kind < 0.7:
                    # td[rows] = {key: ...}: creates the key if it is missing.
                    rows = torch.tensor([1, 4])
                    part = TensorDict({key: value[:2].clone()}, batch_size=[2])
                    local[rows] = part
                    store[rows] = part
                else:
                    if key in local.keys(True):
                        del local[key]
                        del store[key]
                        _drop_empty_subdicts(local)
            except (RuntimeError, KeyError, ValueError):
                # tensordict refused it (a key under a leaf, a shape clash):
                # the store must have refused too, and changed nothing.
                pass
            _same_keys(store, local)
            if list(local.keys()):
                assert (store.to_local() == local).all()
    finally:
        store.drop()


def test_a_write_refused_by_tdstored_changes_no_answer(new_store):
    store = new_store([4])
    store["x"] = torch.zeros(4, 2)
    before = sorted(map(str, store.keys(True, True)))
    with pytest.raises(Exception):
        store["x", "y"] = torch.zeros(4)  # under a leaf
    with pytest.raises(Exception):
        store[torch.tensor([0])] = TensorDict({"x": torch.zeros(1, 3)}, [1])  # wrong shape
    assert sorted(map(str, store.keys(True, True))) == before
    assert store.get_item_shape("x") == torch.Size([4, 2])


def _child_changes(handles, steps, done):
    # A spawned interpreter: opens the stores by handle, and on each step
    # makes one change and says so.
    stores = [TensorDictStore.from_store(h) for h in handles]
    for step in iter(steps.get, None):
        try:
            for td in stores:
                if step == "add":
                    td["added"] = torch.ones(4)
                elif step == "remove":
                    del td["x"]
            done.put("ok")
        except BaseException as err:  # report, don't hang the parent
            done.put(repr(err))


def _eventually(check, timeout=10.0):
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if check():
            return True
        time.sleep(0.002)
    return check()


def test_another_process_changes_reach_this_ones_keys(standalone_addr, cluster_addr):
    stores = [TensorDictStore(batch_size=[4], client=tdstore.Client(a))
              for a in (standalone_addr, cluster_addr)]
    for td in stores:
        td["x"] = torch.zeros(4)
        assert sorted(td.keys()) == ["x"]  # starts the watch
    ctx = worker_context()
    steps, done = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_child_changes, args=([td.handle for td in stores], steps, done))
    proc.start()
    try:
        steps.put("add")
        assert done.get(timeout=120) == "ok"
        for td in stores:
            assert _eventually(lambda: "added" in td), td.client.address
            assert sorted(td.keys()) == ["added", "x"]
        steps.put("remove")
        assert done.get(timeout=60) == "ok"
        for td in stores:
            assert _eventually(lambda: sorted(td.keys()) == ["added"])
            with pytest.raises(KeyError):
                td["x"]
    finally:
        steps.put(None)
        proc.join(timeout=60)
        for td in stores:
            td.drop()
    assert proc.exitcode == 0


def test_keys_of_a_dropped_store_raise(new_store):
    store = new_store([4])
    store["x"] = torch.zeros(4)
    assert list(store.keys()) == ["x"]
    other = TensorDictStore.from_store(store.handle)
    assert list(other.keys()) == ["x"]
    store.drop()
    with pytest.raises(KeyError):
        list(store.keys())
    assert _eventually(lambda: _raises_key_error(lambda: list(other.keys())))


def _raises_key_error(call):
    try:
        call()
    except KeyError:
        return True
    return False

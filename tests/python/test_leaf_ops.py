"""rename_key_, fill_/zero_/masked_fill_/td[idx] = scalar and sub-dict views
against tensordict's own TensorDict on random cases: one call each in
tdstored, no data through the client for renames and fills."""

import random

import pytest
import torch
from tensordict import TensorDict

import tdstore

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
          torch.complex128]


def _random_local(rng, n=6):
    td = TensorDict({}, [n])
    for path in rng.sample([("a",), ("b",), ("n", "x"), ("n", "y"), ("n", "m", "z"), ("o", "w")], 4):
        if any(p[:len(path)] == path or path[:len(p)] == p for p in td.keys(True, True)
               if isinstance(p, tuple)) or path[0] in td.keys() and not isinstance(td.get(path[0]), TensorDict) and len(path) > 1:
            continue
        td[path] = torch.randn(n, rng.randint(1, 3))
    return td


def _same(store, local):
    assert sorted(map(str, store.keys(True, True))) == sorted(map(str, local.keys(True, True)))
    for key in local.keys(True, True):
        assert torch.equal(store[key], local[key]), key


class _Spy:
    """Records which native calls a store makes. A module-level class with
    the native dict as an instance attribute: a class defined in the test
    would hold it in a reference cycle, and a native object collected in a
    later test's forked child crashes it (gRPC does not survive fork)."""

    def __init__(self, real, calls):
        self._real = real
        self._calls = calls

    def __getattr__(self, name):
        self._calls.append(name)
        return getattr(self._real, name)


def _outcome(fn, td):
    try:
        fn(td)
        return "ok"
    except KeyError:
        return "KeyError"
    except Exception as err:  # noqa: BLE001
        return type(err).__name__


def test_rename_key_follows_tensordict_on_random_trees(new_store):
    rng = random.Random(21)
    for trial in range(8):
        local = _random_local(rng)
        store = new_store([6])
        store.update(local.clone())
        counting = []
        native = store._dict
        for _ in range(6):
            # The store's keys: tensordict keeps the empty sub-dict a
            # rename leaves behind, a store has none (docs/python.md).
            keys = [k for k in store.keys(True, False)]
            old = rng.choice(keys)
            new = rng.choice(["fresh", ("fresh", "deep"), "a", ("n", "x"), "q"])
            safe = rng.random() < 0.5
            o = old if isinstance(old, tuple) else (old,)
            w = new if isinstance(new, tuple) else (new,)
            if o != w and (o == w[:len(o)] or w == o[:len(w)]):
                # Into itself, or onto its own parent: tdstored refuses it
                # (tensordict's result would depend on its internals).
                with pytest.raises(RuntimeError, match="conflicts"):
                    store.rename_key_(old, new, safe=safe)
                continue
            want = _outcome(lambda td: td.rename_key_(old, new, safe=safe), local)
            got = _outcome(lambda td: td.rename_key_(old, new, safe=safe), store)
            if want == "ok" or got == "ok":
                assert got == want, (trial, old, new, safe)
            _same(store, local)


def test_rename_moves_no_data_through_the_client(new_store):
    store = new_store([1000])
    store["big"] = torch.randn(1000, 1000)
    calls = []
    real = store._dict
    store._dict = _Spy(real, calls)
    store.rename_key_("big", ("n", "big"))
    store._dict = real
    assert calls == ["rename"]  # no read, no write
    assert store["n", "big"].shape == (1000, 1000)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fill_matches_tensordict_for_every_dtype(new_store, dtype):
    local = TensorDict({"x": torch.zeros(9, 2, dtype=dtype), "n": {"y": torch.zeros(9, dtype=dtype)}}, [9])
    store = new_store([9], rows_per_block=4)
    store.update(local.clone())
    for value in ([True, False] if dtype is torch.bool else [1, -3, 2.75, 0]):
        if not dtype.is_floating_point and not dtype.is_complex and isinstance(value, float):
            value = int(value)
        if dtype is torch.uint8 and value < 0:
            continue
        local.fill_("x", value), store.fill_("x", value)
        local.fill_("n", value), store.fill_("n", value)
        _same(store, local)
    local.zero_(), store.zero_()
    _same(store, local)


def test_indexed_scalar_writes_match_tensordict(new_store):
    rng = random.Random(4)
    # Float leaves only: tensordict's own td[idx] = scalar trips on a dtype
    # mismatch for integer leaves (index_put_ with a float source).
    local = TensorDict({"x": torch.randn(30, 3), "i": torch.arange(30.0), "n": {"b": torch.ones(30)}}, [30])
    store = new_store([30], rows_per_block=7)
    store.update(local.clone())
    for _ in range(15):
        kind = rng.randrange(4)
        if kind == 0:
            a = rng.randrange(30)
            idx = slice(a, rng.randrange(a, 31), rng.randint(1, 3))
        elif kind == 1:
            idx = torch.randint(30, (rng.randint(1, 8),))
        elif kind == 2:
            idx = torch.rand(30) > 0.6
        else:
            idx = rng.randrange(-30, 30)
        value = float(rng.choice([0, 1, 5, -2.5]))
        if rng.random() < 0.5:
            local[idx] = value
            store[idx] = value
        else:
            mask = torch.rand(30) > 0.5
            local.masked_fill_(mask, value)
            store.masked_fill_(mask, value)
        _same(store, local)


def test_fill_sends_one_call_and_no_leaf_bytes(new_store):
    store = new_store([100000])
    store["x"] = torch.randn(100000, 64)
    real = store._dict
    calls = []
    store._dict = _Spy(real, calls)
    store.fill_("x", 3.0)
    store._dict = real
    assert "write" not in calls and calls.count("fill") == 1, calls
    assert torch.equal(store["x"], torch.full((100000, 64), 3.0))


def test_subdict_views_list_their_keys_from_the_store(new_store):
    local = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2), "m": {"c": torch.zeros(2)}}}, [2])
    store = new_store([2])
    store.update(local.clone())
    view = store["n"]
    for args in [(False, False), (True, False), (True, True), (False, True)]:
        assert sorted(map(str, view.keys(*args))) == sorted(map(str, local["n"].keys(*args)))
    # A client without a watched copy asks tdstored for the prefix.
    plain = tdstore.TensorDictStore.from_store(store.name, addr=store.client.address,
                                               watch_schemas=False)
    assert sorted(map(str, plain["n"].keys(True, True))) == sorted(
        map(str, local["n"].keys(True, True)))


def test_clone_copies_inside_tdstored(new_store, client):
    store = new_store([50], rows_per_block=16)
    local = TensorDict({"x": torch.randn(50, 7), "n": {"y": torch.arange(50), "b": torch.rand(50) > 0.5}}, [50])
    store.update(local.clone())
    real = store._dict
    calls = []
    store._dict = _Spy(real, calls)
    copy = store.clone()
    store._dict = real
    try:
        # One call, which creates the copy inside tdstored: no leaf bytes here.
        assert calls == ["clone"], calls
        assert copy.name != store.name
        assert copy._dict.describe()["rows_per_block"] == 16
        _same(copy, local)
        copy["x"] = torch.zeros(50, 7)  # a copy, not a view
        assert torch.equal(store["x"], local["x"])
        # A sub-dict view's clone holds that sub-dict at its root.
        sub = store["n"].clone()
        try:
            _same(sub, local["n"])
        finally:
            sub.drop()
    finally:
        copy.drop()

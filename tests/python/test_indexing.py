"""Property tests: store[idx] and store[idx] = v equal a local TensorDict's, on random
(seeded) indices, batch shapes and dtypes; plus the cost of the hot calls."""

import random

import pytest
import torch
from tensordict import TensorDict

from tdstore import TensorDictStore
from _helpers import assert_td_equal

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64,
          torch.float16, torch.uint8, torch.int8, torch.int16, torch.int32, torch.float64,
          torch.complex128]
BATCHES = [(13,), (6, 5), (4, 3, 5)]


def random_tensor(g, shape, dtype):
    if dtype is torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -100), min(info.max, 100), shape, generator=g,
                         dtype=dtype)


def random_local(rng, g, batch):
    leaves = {}
    for i in range(rng.randint(1, 4)):
        dtype = rng.choice(DTYPES)
        elem = rng.choice([(), (2,), (2, 3)])
        leaves[f"l{i}"] = random_tensor(g, batch + elem, dtype)
    leaves["nested"] = {"x": random_tensor(g, batch + (2,), torch.bfloat16),
                        "y": random_tensor(g, batch, rng.choice(DTYPES))}
    return TensorDict(leaves, batch_size=batch)


def random_positions(rng, g, n, shape, unique):
    count = 1
    for s in shape:
        count *= s
    if unique:
        values = torch.randperm(n, generator=g)[:count]
        shape = (len(values),) if count > n else shape
    else:
        values = torch.randint(0, n, (count,), generator=g)
    if rng.random() < 0.3:
        values = values - n  # negative positions count from the end
    return values.reshape(shape) if values.numel() == count else values


def random_index(rng, g, batch, unique=False):
    """A torch index over `batch`: ints, slices, lists, int tensors, masks, Ellipsis."""
    ndim = len(batch)
    form = rng.choice(["int", "slice", "list", "tensor", "tensor2d", "mask", "ndmask",
                       "tuple", "tuple", "tuple", "ellipsis"])
    n0 = batch[0]
    if form == "int":
        return rng.randint(-n0, n0 - 1)
    if form == "slice":
        return slice(rng.choice([None, rng.randint(-n0 - 2, n0 + 2)]),
                     rng.choice([None, rng.randint(-n0 - 2, n0 + 2)]),
                     rng.choice([None, 1, 2, 3]))
    if form == "list":
        k = rng.randint(0, min(5, n0))
        return [int(v) for v in random_positions(rng, g, n0, (k,), unique)]
    if form == "tensor":
        return random_positions(rng, g, n0, (rng.randint(1, 5),), unique)
    if form == "tensor2d":
        return random_positions(rng, g, n0, (2, 2), unique)
    if form == "mask":
        return torch.rand(n0, generator=g) > 0.5
    if form == "ndmask":
        k = rng.randint(1, ndim)
        return torch.rand(batch[:k], generator=g) > 0.4
    if form == "ellipsis":
        return (Ellipsis, rng.randint(-batch[-1], batch[-1] - 1))
    # A tuple over several dims; its advanced items share one shape so they
    # broadcast together (and may sit apart, which moves their dims first).
    items = []
    adv_shape = rng.choice([(3,), (2, 2)])
    if unique:
        adv_shape = (2,)
    used_mask = False
    dims = rng.randint(1, ndim)
    for d in range(dims):
        n = batch[d]
        kind = rng.choice(["int", "slice", "slice", "positions", "mask"])
        if kind == "int":
            items.append(rng.randint(-n, n - 1))
        elif kind == "slice":
            items.append(slice(rng.choice([None, rng.randint(0, n)]), None,
                               rng.choice([None, 2])))
        elif kind == "mask" and not used_mask and not any(
                isinstance(i, torch.Tensor) for i in items):
            used_mask = True
            items.append(torch.rand(n, generator=g) > 0.5)
        elif not used_mask:
            shape = adv_shape if not unique else (min(2, n),)
            items.append(random_positions(rng, g, n, shape, unique))
        else:
            items.append(slice(None))
    if rng.random() < 0.3 and dims < ndim:
        items.insert(rng.randint(0, len(items)), Ellipsis)
    return tuple(items)


def value_for(rng, g, local_part):
    """Random values for local_part's leaves, sometimes of other dtypes (cast on
    write) and sometimes of batch size [] (broadcast)."""
    broadcast = rng.random() < 0.25
    batch = () if broadcast else tuple(local_part.batch_size)
    leaves = {}
    for key in local_part.keys(True, True):
        t = local_part.get(key)
        dtype = t.dtype
        if rng.random() < 0.3 and not dtype.is_complex:
            dtype = rng.choice([torch.float64, torch.int32, torch.float32])
            if t.dtype is torch.bool:
                dtype = torch.bool
        elem = tuple(t.shape[local_part.batch_dims:])
        leaves[key] = random_tensor(g, batch + elem, dtype)
    return TensorDict(leaves, batch_size=batch)


@pytest.mark.parametrize("seed", range(4))
def test_random_reads_equal_local(client, seed):
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    for batch in BATCHES:
        local = random_local(rng, g, batch)
        td = TensorDictStore.from_tensordict(local, client=client)
        try:
            assert_td_equal(td.to_local(), local)
            for _ in range(12):
                idx = random_index(rng, g, batch)
                try:
                    want = local[idx]
                except (IndexError, ValueError, RuntimeError) as err:
                    with pytest.raises(type(err)):
                        td[idx]
                    continue
                got = td[idx]
                if want is local:  # td[...] / td[:] are the dict itself
                    assert got is td
                    continue
                assert isinstance(got, TensorDict), idx
                assert_td_equal(got, want)
                # The same selection of one leaf (get_at is get(key)[idx]).
                try:
                    want_leaf = local.get_at(("nested", "x"), idx)
                except IndexError:
                    with pytest.raises(IndexError):
                        td.get_at(("nested", "x"), idx)
                else:
                    assert torch.equal(td.get_at(("nested", "x"), idx), want_leaf)
        finally:
            td.drop()


@pytest.mark.parametrize("seed", range(4))
def test_random_writes_equal_local(client, seed):
    rng = random.Random(100 + seed)
    g = torch.Generator().manual_seed(100 + seed)
    for batch in BATCHES:
        local = random_local(rng, g, batch)
        td = TensorDictStore.from_tensordict(local, client=client)
        try:
            for _ in range(10):
                idx = random_index(rng, g, batch, unique=True)
                part = local[idx]
                value = value_for(rng, g, part)
                # torch casts for basic indices but refuses other dtypes with
                # advanced ones; the store always casts to the leaf's dtype.
                cast = value.clone()
                for key in part.keys(True, True):
                    cast.set(key, value.get(key).to(part.get(key).dtype))
                if cast.batch_size != part.batch_size:  # broadcast: the server's job
                    cast = cast.expand(part.batch_size).clone()
                local[idx] = cast
                td[idx] = value
                assert_td_equal(td.to_local(), local)
        finally:
            td.drop()


def test_write_creates_a_missing_leaf_zero_filled_like_tensordict(new_store):
    td = new_store([4])
    local = TensorDict({"a": torch.zeros(4)}, [4])
    td["a"] = torch.zeros(4)
    for target in (td, local):
        target[1:3] = TensorDict({"new": torch.ones(2, 3)}, [2])
    assert_td_equal(td.to_local(), local)


def test_set_every_leaf_to_a_number_at_an_index(new_store):
    td = new_store([3])
    td["a"] = torch.zeros(3)
    td["n", "b"] = torch.zeros(3, 2, dtype=torch.int64)
    td[torch.tensor([0, 2])] = 4
    assert td["a"].tolist() == [4, 0, 4] and td["n", "b"][:, 1].tolist() == [4, 0, 4]


def test_none_index_has_local_semantics(new_store):
    local = TensorDict({"a": torch.arange(12).view(4, 3)}, [4, 3])
    td = new_store([4, 3])
    td.update(local)
    for idx in [None, (None, 1), (slice(1, 3), None), (Ellipsis, None), (2, None, slice(0, 2))]:
        assert_td_equal(td[idx], local[idx])


class CountingDict:
    """The real native Dict, counting the calls made on it (instrumentation, not a fake)."""

    def __init__(self, real):
        self._real = real
        self.calls = []

    # Answered by the client's watched schema copy, with no round trip once
    # the copy is trusted (test_schema_watch.py): not a call to count.
    LOCAL = {"batch_size"}

    def __getattr__(self, name):
        attr = getattr(self._real, name)
        if callable(attr) and name not in self.LOCAL:
            def counted(*args, **kwargs):
                self.calls.append(name)
                return attr(*args, **kwargs)
            return counted
        return attr


def test_hot_calls_cost_one_native_call(new_store):
    td = new_store([100])
    td["obs"] = torch.randn(100, 4)
    td["next", "done"] = torch.zeros(100, dtype=torch.bool)
    td["a"] = torch.zeros(100, dtype=torch.int64)
    counting = CountingDict(td._dict)
    td._dict = counting

    def cost(fn):
        counting.calls.clear()
        fn()
        return list(counting.calls)

    assert cost(lambda: td[torch.randint(100, (16,))]) == ["read"]
    assert cost(lambda: td[3]) == ["read"]
    assert cost(lambda: td["obs"]) == ["read"]
    assert cost(lambda: td["next", "done"]) == ["read"]
    assert cost(lambda: td.to_local()) == ["read"]
    assert cost(lambda: list(td.keys())) == ["key_names"]
    assert cost(lambda: "obs" in td) == ["contains"]
    assert cost(lambda: td.__setitem__("obs", torch.randn(100, 4))) == ["write"]
    assert cost(lambda: td.update({"obs": torch.randn(100, 4), "a": torch.ones(100)})) == ["write"]
    # An indexed write casts its values to the leaves' dtypes (a[...] is
    # int64, the value float), which describe() gives from the client core's
    # watched schema copy, with no round trip: one call to tdstored.
    assert cost(lambda: td.__setitem__(slice(0, 2), {"obs": torch.ones(2, 4),
                                                    "a": torch.ones(2)})) == ["describe", "write"]
    assert td["a"].dtype == torch.float32  # update() replaced it with the float value
    assert cost(lambda: dict(td.items(True, True))) == ["keys", "read"]

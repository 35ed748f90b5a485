"""``TensorDictStore.resize_(n)``: batch dim 0 changed in tdstored, on both
back ends. Random resizes and row writes against a local model built with
torch (a grow appends zero rows, a shrink keeps the first rows), another
process seeing the new size, and bad input refused with nothing changed."""

import random
import time

import pytest
import torch
from tensordict import TensorDict

import tdstore
from _helpers import random_index, worker_context

_DTYPES = [torch.float32, torch.int64, torch.bool, torch.float16, torch.uint8]


def _random_leaf(gen: torch.Generator, shape, dtype):
    # Integer-valued: exact in every dtype, no NaN to compare.
    values = torch.randint(0, 100, shape, generator=gen)
    return (values % 2 == 1) if dtype is torch.bool else values.to(dtype)


def _resized(tensor: torch.Tensor, n: int) -> torch.Tensor:
    """torch's picture of a resize: the first rows kept, zero rows added."""
    if n <= tensor.shape[0]:
        return tensor[:n].clone()
    pad = torch.zeros((n - tensor.shape[0],) + tuple(tensor.shape[1:]), dtype=tensor.dtype)
    return torch.cat([tensor, pad])



@pytest.mark.parametrize("two_batch_dims", [False, True])
def test_random_resizes_match_torch(new_store, two_batch_dims):
    rng = random.Random(1201 + two_batch_dims)
    gen = torch.Generator().manual_seed(1201)
    n = 9
    tail = (2,) if two_batch_dims else ()
    model = {
        ("obs",): _random_leaf(gen, (n,) + tail + (4,), torch.float32),
        ("action",): _random_leaf(gen, (n,) + tail, torch.int64),
        ("next", "done"): _random_leaf(gen, (n,) + tail + (1,), torch.bool),
        ("next", "h"): _random_leaf(gen, (n,) + tail + (3,), torch.float16),
    }
    # Small blocks and parts, so that the resizes cross them.
    store = new_store((n,) + tail, rows_per_block=2, part_bytes=24)
    store.update(TensorDict({k if len(k) > 1 else k[0]: v.clone() for k, v in model.items()},
                            (n,) + tail))
    for step in range(14):
        n = rng.choice([0, 1, rng.randrange(1, 30), n + rng.randrange(1, 6), max(n - 3, 0)])
        assert store.resize_(n) is store
        model = {k: _resized(v, n) for k, v in model.items()}
        assert store.batch_size == torch.Size((n,) + tail)
        assert len(store) == n
        local = store.to_local()
        for key, want in model.items():
            got = local[key]
            assert got.dtype == want.dtype and got.shape == want.shape, (step, key)
            assert torch.equal(got, want), (step, key, n)
        if n == 0:
            continue
        # The new size is the one every index is checked against, and new rows
        # are rows like the others.
        idx = random_index(rng, n)
        row_shape = torch.zeros(n)[idx].shape + tail
        values = {k: _random_leaf(gen, row_shape + tuple(v.shape[1 + len(tail):]), v.dtype)
                  for k, v in model.items()}
        store[idx] = TensorDict({k if len(k) > 1 else k[0]: v for k, v in values.items()},
                                row_shape)
        for key, value in values.items():
            model[key][idx] = value
        idx = random_index(rng, n)
        got = store[idx]
        for key, want in model.items():
            assert torch.equal(got[key], want[idx]), (step, key, idx)
    with pytest.raises(IndexError):
        store[n + 1]


def _child_resizes(handle, queue):
    try:
        td = tdstore.open_handle(handle)
        deadline = time.monotonic() + 30
        while td.batch_size[0] != 30 and time.monotonic() < deadline:
            time.sleep(0.002)
        queue.put(("saw", tuple(td.batch_size), td["x"][:10].tolist(), td["x"][10:].abs().sum().item()))
        td.resize_(5)
        queue.put("shrunk")
    except BaseException as err:  # report, don't hang the parent
        queue.put(repr(err))


def test_another_process_sees_the_new_size_and_resizes_it(new_store):
    td = new_store([10])
    td["x"] = torch.arange(10, dtype=torch.float32)
    ctx = worker_context()
    queue = ctx.Queue()
    child = ctx.Process(target=_child_resizes, args=(td.handle, queue))
    child.start()
    try:
        td.resize_(30)
        assert queue.get(timeout=120) == ("saw", (30,), list(range(10)), 0.0)
        assert queue.get(timeout=60) == "shrunk"
    finally:
        child.join(60)
    deadline = time.monotonic() + 5
    while td.batch_size[0] != 5 and time.monotonic() < deadline:
        time.sleep(0.002)
    assert td.batch_size == torch.Size([5])
    assert torch.equal(td["x"], torch.arange(5, dtype=torch.float32))


def test_bad_resizes_are_refused_and_change_nothing(new_store):
    td = new_store([4])
    td["x"] = torch.arange(4)
    td["n", "y"] = torch.ones(4, 2)
    version = td._dict.describe()["version"]
    with pytest.raises(ValueError):
        td.resize_(-1)
    for bad in (2.0, "3", None, True, torch.tensor(2.5)):
        with pytest.raises(TypeError):
            td.resize_(bad)
    td.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        td.resize_(8)
    td.unlock_()
    assert td._dict.describe()["version"] == version + 2  # lock and unlock only
    assert td.batch_size == torch.Size([4])
    assert torch.equal(td["x"], torch.arange(4))
    with pytest.raises(RuntimeError, match="resize_"):
        td.batch_size = [6]
    scalar = new_store([])
    scalar["s"] = torch.tensor(1.0)
    with pytest.raises(ValueError, match="no batch dims"):
        scalar.resize_(2)


def test_a_view_resizes_its_dict_and_a_tensor_size_is_accepted(new_store):
    td = new_store([3])
    td["n", "y"] = torch.ones(3)
    view = td["n"]
    assert view.resize_(torch.tensor(6)) is view
    assert td.batch_size == torch.Size([6]) and view.batch_size == torch.Size([6])
    assert torch.equal(td["n", "y"], torch.tensor([1.0, 1, 1, 0, 0, 0]))

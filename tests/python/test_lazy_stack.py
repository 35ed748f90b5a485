"""LazyStackedTensorDictStore beside tensordict's own (the seed, over
redis-py on the standalone back end's redis-server) and beside the local
lazy stack it was made from: random stacks, random indexes, writes through
the stack and through every kind of element view, read back here and from
another process. Shape changes through a view are refused with nothing
written."""

import contextlib
import pickle
import random

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack
from tensordict.store import LazyStackedTensorDictStore as SeedStack

import tdstore
from tdstore import LazyStackedTensorDictStore, TensorDictStore
from _helpers import worker_context


def _random_stack(rng: random.Random, ragged: bool, nested: bool = True):
    """A lazy stack of 2..6 elements of batch [2..4], leaves "a" [inner, k],
    "b" [inner] and ("n", "x") [inner, 2]; with ``ragged`` "a"'s k differs
    between elements."""
    count, inner = rng.randint(2, 6), rng.randint(2, 4)
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    widths = [rng.randint(1, 4) if ragged else 3 for _ in range(count)]
    if ragged and len(set(widths)) == 1:
        widths[0] += 1
    elements = []
    for k in widths:
        e = {"a": torch.randn(inner, k, generator=g), "b": torch.randn(inner, generator=g)}
        if nested:
            e["n"] = TensorDict({"x": torch.randn(inner, 2, generator=g)}, [inner])
        elements.append(TensorDict(e, [inner]))
    return lazy_stack(elements, 0), elements


def _same(got, want):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.shape == want.shape, (got, want)
        assert torch.equal(got, want)
        return
    assert got.batch_size == want.batch_size
    keys = sorted(map(str, want.keys(include_nested=True, leaves_only=True)))
    assert sorted(map(str, got.keys(include_nested=True, leaves_only=True))) == keys
    for key in want.keys(include_nested=True, leaves_only=True):
        _same(got.get(key), want.get(key))


def _elements_equal(store, elements):
    for i, e in enumerate(elements):
        _same(store[i].to_tensordict(), e)


@pytest.fixture
def seed_kw(standalone_redis_port):
    return {"host": "127.0.0.1", "port": standalone_redis_port}


@contextlib.contextmanager
def _both(local, addr, seed_kw):
    """The seed's stack and ours of ``local``, dropped afterwards."""
    seed = SeedStack.from_lazy_stack(local, **seed_kw)
    try:
        ours = LazyStackedTensorDictStore.from_lazy_stack(local, addr=addr)
        try:
            yield seed, ours
        finally:
            ours.drop()
    finally:
        seed.clear_redis()


@pytest.mark.parametrize("ragged", [False, True])
def test_random_stacks_read_as_the_seed_and_the_local_stack(addr, seed_kw, ragged):
    rng = random.Random(11 + ragged)
    for _ in range(4):
        local, elements = _random_stack(rng, ragged)
        with _both(local, addr, seed_kw) as (seed, ours):
            assert isinstance(ours, LazyStackedTensorDictStore)
            assert ours.batch_size == seed.batch_size == local.batch_size
            assert (ours._count, ours._stack_dim, ours._inner_batch_size) == (
                seed._count, seed._stack_dim, seed._inner_batch_size)
            assert set(ours.keys()) == set(seed.keys())
            assert "count=" in repr(ours) and "LazyStackedTensorDictStore" in repr(ours)
            for i in range(-len(elements), len(elements)):
                _same(ours[i].to_tensordict(), elements[i])
                _same(ours[i]["b"], seed[i]["b"])
                _same(ours[i]["n", "x"], seed[i]["n", "x"])
                _same(ours[i]["a"], elements[i]["a"])
            if not ragged:
                for key in ("a", "b", ("n", "x")):
                    _same(ours[key], seed[key])
                _same(ours.to_local(), local.contiguous())
            n = len(elements)
            for index in (slice(1, n), slice(None, None, 2), torch.tensor([0, n - 1, 0]),
                          torch.tensor([True] * (n - 1) + [False])):
                got = ours[index]
                want = local[index]
                for j in range(got.batch_size[0]):
                    _same(got[j], want[j])
            with pytest.raises(IndexError):
                ours[n]


def test_writes_through_the_stack_match_the_seed_and_a_local_stack(addr, seed_kw):
    rng = random.Random(3)
    local, elements = _random_stack(rng, ragged=False)
    want = local.contiguous().clone()
    with _both(local, addr, seed_kw) as (seed, ours):
        n, inner = want.batch_size
        for step in range(12):
            kind = rng.choice(["int", "slice", "tensor"])
            if kind == "int":
                index = rng.randrange(-n, n)
            elif kind == "slice":
                a = rng.randrange(n)
                index = slice(a, rng.randrange(a + 1, n + 1))
            else:
                index = torch.tensor(sorted(rng.sample(range(n), rng.randint(1, n))))
            rows = want[index].batch_size
            value = TensorDict({"a": torch.full(tuple(rows) + (3,), float(step)),
                                "b": torch.full(tuple(rows), -float(step)),
                                "n": {"x": torch.full(tuple(rows) + (2,), step + 0.5)}}, rows)
            ours[index] = value
            seed[index] = value
            want[index] = value
        _same(ours.to_local(), want)
        _same(seed.to_tensordict(), want)


def _view_writes(view, rng, inner, width):
    """Every kind of write through an element view, each with a fresh value;
    returns what the element must then hold (a local TensorDict)."""
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    want = view.to_tensordict().clone()

    def val(*shape):
        return torch.randn(*shape, generator=g)

    a = val(inner, width)
    view.set("a", a, inplace=True)
    want["a"] = a
    b = val(inner)
    view["b"] = b
    want["b"] = b
    x = val(inner, 2)
    view["n", "x"] = x
    want["n", "x"] = x
    x = val(inner, 2)
    view.set(("n", "x"), x)
    want["n", "x"] = x
    x = val(inner, 2)
    view["n"]["x"] = x  # a nested view of the element writes through too
    want["n", "x"] = x
    up = TensorDict({"a": val(inner, width), "n": {"x": val(inner, 2)}}, [inner])
    view.update(up)
    want.update(up)
    row = rng.randrange(inner)
    part = TensorDict({"a": val(width), "b": val(()), "n": {"x": val(2)}}, [])
    view[row] = part
    want[row] = part
    view.set_at_("b", torch.tensor(7.0), row)
    want.set_at_("b", torch.tensor(7.0), row)
    view["b"] = torch.arange(inner, dtype=torch.float64)  # cast to the leaf's float32
    want["b"] = torch.arange(inner, dtype=torch.float32)
    return want


def _child_reads(handle, queue):
    stack = tdstore.LazyStackedTensorDictStore.from_store(handle)
    out = []
    for i in range(stack.batch_size[0]):
        element = stack[i].to_tensordict()
        out.append({str(k): element.get(k).tolist()
                    for k in element.keys(include_nested=True, leaves_only=True)})
    queue.put(out)


@pytest.mark.parametrize("ragged", [False, True])
def test_every_kind_of_element_view_write_lands_and_another_process_reads_it(addr, ragged):
    rng = random.Random(21 + ragged)
    local, elements = _random_stack(rng, ragged)
    ours = LazyStackedTensorDictStore.from_lazy_stack(local, addr=addr)
    try:
        inner = local.batch_size[1]
        wants = [e.clone() for e in elements]
        for i in rng.sample(range(len(elements)), len(elements)):
            wants[i] = _view_writes(ours[i], rng, inner, elements[i]["a"].shape[-1])
        _elements_equal(ours, wants)
        # Another process sees every write.
        ctx = worker_context()
        queue = ctx.Queue()
        child = ctx.Process(target=_child_reads, args=(ours.handle, queue))
        child.start()
        seen = queue.get(timeout=120)
        child.join(60)
        assert child.exitcode == 0
        assert seen == [{str(k): w.get(k).tolist()
                         for k in w.keys(include_nested=True, leaves_only=True)}
                        for w in wants]
    finally:
        ours.drop()


def test_view_writes_match_the_seeds_view_writes(addr, seed_kw):
    rng = random.Random(8)
    local, elements = _random_stack(rng, ragged=False)
    with _both(local, addr, seed_kw) as (seed, ours):
        for i in range(len(elements)):
            value = torch.full((local.batch_size[1], 3), float(i))
            for stack in (seed, ours):
                stack[i].set("a", value, inplace=True)
                stack[i]["b"] = value[:, 0]
                stack[i].set(("n", "x"), value[:, :2], inplace=True)
        _same(ours.to_local(), seed.to_tensordict())


@pytest.mark.parametrize("ragged", [False, True])
def test_a_shape_change_through_a_view_is_refused_and_writes_nothing(addr, seed_kw, ragged):
    rng = random.Random(5)
    local, elements = _random_stack(rng, ragged)
    with _both(local, addr, seed_kw) as (seed, ours):
        before = [ours[i].to_tensordict() for i in range(len(elements))]
        bad = torch.randn(10, 10)
        with pytest.raises((ValueError, RuntimeError)):
            seed[0].set("a", bad, inplace=True)
        wider = torch.randn(local.batch_size[1], 9)  # elements' "a" is 1..4 wide
        for write in (lambda v: v.set("a", bad, inplace=True),
                      lambda v: v.set("a", wider, inplace=True),
                      lambda v: v.__setitem__("a", wider),
                      lambda v: v.__setitem__("b", torch.randn(local.batch_size[1] + 1)),
                      lambda v: v.update({"n": {"x": bad}})):
            with pytest.raises((ValueError, RuntimeError)):
                write(ours[0])
        for i, b in enumerate(before):
            _same(ours[i].to_tensordict(), b)
        # What would change every element is refused through one.
        for call in (lambda v: v.del_("b"), lambda v: v.rename_key_("b", "c"),
                     lambda v: v.resize_(3), lambda v: v.lock_()):
            with pytest.raises(RuntimeError, match="LazyStackedTensorDictStore"):
                call(ours[0])
        assert set(ours.keys()) == {"a", "b", "n"} and not ours.is_locked


def test_a_new_key_through_a_view_is_zero_elsewhere(addr):
    local, elements = _random_stack(random.Random(2), ragged=False)
    ours = LazyStackedTensorDictStore.from_lazy_stack(local, addr=addr)
    try:
        inner = local.batch_size[1]
        ours[1]["c"] = torch.ones(inner, 5)
        assert torch.equal(ours["c"][1], torch.ones(inner, 5))
        others = [i for i in range(len(elements)) if i != 1]
        assert torch.equal(ours["c"][others], torch.zeros(len(others), inner, 5))
        # A new key whose cells differ in shape (a ragged leaf) too.
        cells = [torch.ones(k + 1) for k in range(inner)]
        ours[1]["r"] = cells
        for k, cell in enumerate(ours[1]["r"]):
            assert torch.equal(cell, cells[k])
    finally:
        ours.drop()


def test_pickle_from_store_and_td_id_give_the_stack_back(addr, seed_kw):
    local, elements = _random_stack(random.Random(4), ragged=True)
    ours = LazyStackedTensorDictStore.from_lazy_stack(local, addr=addr)
    try:
        for back in (pickle.loads(pickle.dumps(ours)),
                     LazyStackedTensorDictStore.from_store(td_id=ours._td_id, addr=addr),
                     LazyStackedTensorDictStore.from_store(ours.handle)):
            assert type(back) is LazyStackedTensorDictStore
            assert back._count == len(elements) and back.batch_size == local.batch_size
            _elements_equal(back, elements)
        # An element view pickles as the stack's element.
        view = pickle.loads(pickle.dumps(ours[1]))
        _same(view.to_tensordict(), elements[1])
        with pytest.raises(KeyError, match="No TensorDictStore with td_id='no-such-stack'"):
            LazyStackedTensorDictStore.from_store(td_id="no-such-stack", addr=addr)
    finally:
        ours.drop()


def test_stacks_along_another_dim(addr, seed_kw):
    g = torch.Generator().manual_seed(6)
    tds = [TensorDict({"a": torch.randn(4, 3, generator=g)}, [4]) for _ in range(5)]
    local = lazy_stack(tds, 1)
    with _both(local, addr, seed_kw) as (seed, ours):
        assert ours.batch_size == seed.batch_size == torch.Size([4, 5])
        assert ours._stack_dim == seed._stack_dim == 1
        assert ours._count == 5 and ours._inner_batch_size == torch.Size([4])
        _same(ours["a"], local.contiguous()["a"])
        _same(ours[1], local[1].contiguous())
        reopened = LazyStackedTensorDictStore.from_store(ours.handle)
        assert reopened._stack_dim == 1
    # Elements of different shapes along dim 1: refused, nothing created.
    names = set(tdstore.Client(addr).list())
    ragged = LazyStackedTensorDict(TensorDict({"a": torch.zeros(4, 2)}, [4]),
                                   TensorDict({"a": torch.zeros(4, 3)}, [4]), stack_dim=1)
    with pytest.raises(ValueError, match="along dim 1"):
        LazyStackedTensorDictStore.from_lazy_stack(ragged, addr=addr)
    assert set(tdstore.Client(addr).list()) == names


def test_a_constructed_stack_takes_elements(addr):
    stack = LazyStackedTensorDictStore(count=3, inner_batch_size=[2], addr=addr)
    try:
        assert stack.batch_size == torch.Size([3, 2]) and stack._stack_dim == 0
        for i in range(3):
            stack[i] = TensorDict({"a": torch.full((2, 4), float(i))}, [2])
        assert torch.equal(stack["a"][:, 0, 0], torch.tensor([0.0, 1.0, 2.0]))
        assert isinstance(stack, TensorDictStore)
    finally:
        stack.drop()

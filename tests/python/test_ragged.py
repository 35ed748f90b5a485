"""Ragged leaves and lazy stacks: a LazyStackedTensorDict whose elements'
tensors differ in shape goes into tdstore and comes back as the same lazy
stack; rows read and written by every index kind against tensordict's own
lazy stacks on random cases; element writes that change a row's shape; cells
wider than the slots; nested tensors and lists; refusals that write nothing;
and the whole mix read back equal from another process."""

import random

import pytest
import torch
from tensordict import LazyStackedTensorDict, NonTensorStack, TensorDict, lazy_stack
from tensordict.base import _is_leaf_nontensor

from tdstore import TensorDictStore
import tdstore
from _helpers import worker_context


def random_element(g, rng, dtype=torch.float32):
    """One element: a ragged obs [k, 3], a ragged 'seq' of any length, a dense
    reward, a nested ragged leaf, and a label."""
    k = rng.randint(0, 5)
    return TensorDict({
        "obs": torch.randn(k, 3, generator=g).to(dtype),
        "seq": torch.randint(0, 100, (rng.randint(1, 9),), generator=g),
        "reward": torch.randn((), generator=g),
        "next": {"pix": torch.randint(0, 255, (rng.randint(1, 3), 2, rng.randint(1, 3)),
                                      generator=g, dtype=torch.uint8)},
    }, [])


def random_stack(rng, n):
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    return [random_element(g, rng) for _ in range(n)]


def leaf_keys(td):
    """Every leaf key, non-tensors included (keys(True, True) leaves them out)."""
    return list(td.keys(True, True, is_leaf=_is_leaf_nontensor))


def plain(value):
    """A leaf as plain Python: a tensor's list, a non-tensor's data."""
    if isinstance(value, torch.Tensor):
        return (str(value.dtype), tuple(value.shape), value.tolist())
    return value.data


def assert_same_element(got, want):
    assert sorted(map(str, leaf_keys(got))) == sorted(map(str, leaf_keys(want)))
    for key in leaf_keys(want):
        a, b = got.get(key), want.get(key)
        if isinstance(b, torch.Tensor):
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), (key, a, b)
        else:
            assert type(a) is type(b) and a.data == b.data, (key, a, b)


def assert_same_stack(got, elements):
    """``got`` (a lazy stack along dim 0) holds exactly ``elements``."""
    assert isinstance(got, LazyStackedTensorDict), type(got)
    assert got.stack_dim == 0
    assert got.batch_size == torch.Size([len(elements)])
    for i, want in enumerate(elements):
        assert_same_element(got[i], want)


def test_a_lazy_stack_round_trips_as_the_same_lazy_stack(addr):
    rng = random.Random(1)
    elements = random_stack(rng, 17)
    local = lazy_stack(elements, 0)
    store = TensorDictStore.from_tensordict(local, addr=addr)
    try:
        kinds = {p: kind for p, (_, _, kind, _) in store._describe_full().items()}
        # Shapes that differ are ragged; one that agrees stays a tensor leaf.
        assert kinds[("obs",)] == "ragged" and kinds[("next", "pix")] == "ragged"
        assert kinds[("reward",)] == "tensor"
        assert store.batch_size == torch.Size([17])
        assert_same_stack(store.to_local(), elements)
        assert_same_stack(store.to_tensordict(), elements)
        # td["key"]: a nested tensor, as tensordict's get(as_nested_tensor=True).
        obs = store["obs"]
        assert obs.is_nested
        want = local.get("obs", as_nested_tensor=True)
        for a, b in zip(obs.unbind(), want.unbind()):
            assert torch.equal(a, b)
        assert torch.equal(store["reward"], local["reward"])
        # A sub-dict of ragged leaves reads as a lazy stack too.
        assert_same_stack(store["next"].to_local(), [e["next"] for e in elements])
    finally:
        store.drop()


@pytest.mark.parametrize("trial", range(4))
def test_reads_by_every_index_kind_equal_tensordicts_lazy_stacks(addr, trial):
    rng = random.Random(10 + trial)
    n = rng.randint(5, 40)
    elements = random_stack(rng, n)
    local = lazy_stack(elements, 0)
    store = TensorDictStore.from_tensordict(local, addr=addr, rows_per_block=4)
    try:
        for _ in range(12):
            kind = rng.randrange(5)
            if kind == 0:
                i = rng.randrange(-n, n)
                got = store[i]
                assert isinstance(got, TensorDict)
                assert_same_element(got, elements[i])
                assert torch.equal(store.get_at("obs", i), elements[i]["obs"])
                continue
            if kind == 1:
                start, stop = sorted(rng.sample(range(n + 1), 2))
                index = slice(start, stop, rng.randint(1, 3))
                picked = list(range(n))[index]
            elif kind == 2:
                picked = [rng.randrange(n) for _ in range(rng.randint(1, 12))]  # duplicates too
                index = torch.tensor(picked)
            elif kind == 3:
                mask = torch.tensor([rng.random() < 0.4 for _ in range(n)])
                mask[rng.randrange(n)] = True
                index = mask
                picked = mask.nonzero().squeeze(1).tolist()
            else:
                picked = [rng.randrange(n) for _ in range(rng.randint(1, 5))]
                index = picked  # a list, as torch takes it
            got = store[index]
            want = local[index]
            assert len(want.tensordicts) == len(picked)
            assert_same_stack(got, [elements[j] for j in picked])
    finally:
        store.drop()


def test_row_writes_by_every_index_kind_equal_a_model(addr):
    """Rows written as lazy stacks (any shapes, wider than the slots too),
    element writes that change a row's shape, dense rows and casts; each
    checked against a list of elements written as Python would."""
    rng = random.Random(7)
    n = 24
    model = random_stack(rng, n)
    store = TensorDictStore.from_tensordict(lazy_stack(model, 0), addr=addr, rows_per_block=8)
    g = torch.Generator().manual_seed(3)
    try:
        for step in range(25):
            kind = rng.randrange(4)
            if kind == 0:
                picked = [rng.randrange(n)]
                index = picked[0]
                new = [random_element(g, rng)]
                store[index] = new[0]
            elif kind == 1:
                start = rng.randrange(n)
                picked = list(range(start, min(n, start + rng.randint(1, 6))))
                index = slice(start, start + len(picked))
                new = random_stack(rng, len(picked))
                store[index] = lazy_stack(new, 0)
            elif kind == 2:
                picked = rng.sample(range(n), rng.randint(1, 6))  # distinct: order matters
                index = torch.tensor(picked)
                new = random_stack(rng, len(picked))
                if step % 5 == 0:  # a long cell: its slots must widen
                    new[0]["seq"] = torch.arange(300 + step)
                store[index] = lazy_stack(new, 0)
            else:
                mask = torch.tensor([rng.random() < 0.3 for _ in range(n)])
                picked = mask.nonzero().squeeze(1).tolist()
                index = mask
                new = random_stack(rng, len(picked))
                if not picked:
                    continue
                store[index] = lazy_stack(new, 0)
            for j, e in zip(picked, new):
                model[j] = e
            assert_same_stack(store.to_local(), model)
        # A dense tensor into a ragged leaf's rows: each row one cell, cast to
        # the leaf's dtype (float64 -> float32), as torch casts in t[i] = x.
        store[torch.tensor([1, 2])] = TensorDict({"obs": torch.ones(2, 4, 3, dtype=torch.float64)},
                                                 [2])
        for j in (1, 2):
            model[j]["obs"] = torch.ones(4, 3)
        store.set_at_("seq", torch.arange(7), 5)  # one cell of a new length
        model[5]["seq"] = torch.arange(7)
        assert_same_stack(store.to_local(), model)
    finally:
        store.drop()


def test_nested_tensors_lists_and_cells_of_other_ndims(addr):
    store = TensorDictStore(batch_size=[3], addr=addr)
    try:
        nested = torch.nested.nested_tensor([torch.arange(2.0), torch.arange(5.0),
                                             torch.arange(0.0)])
        store["a"] = nested
        got = store["a"]
        assert got.is_nested
        assert [t.tolist() for t in got.unbind()] == [[0, 1], [0, 1, 2, 3, 4], []]
        # Cells of different numbers of dims: a list (torch has no nested
        # tensor of them), 0-d cells included.
        cells = [torch.tensor(5, dtype=torch.int16), torch.ones(2, 2, dtype=torch.int16),
                 torch.zeros(3, dtype=torch.int16)]
        store["b"] = cells
        got = store["b"]
        assert isinstance(got, list)
        for a, b in zip(got, cells):
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        row = store[1]
        assert torch.equal(row["b"], cells[1]) and torch.equal(row["a"], torch.arange(5.0))
        # A dict whose ragged leaf has rows no one wrote: they read empty.
        store.resize_(5)
        assert [t.shape for t in store["b"]][3:] == [torch.Size([0]), torch.Size([0])]
        # Rows of a new ragged key: the leaf is created, other rows empty.
        store[torch.tensor([0, 4])] = lazy_stack([TensorDict({"c": torch.ones(2)}, []),
                                                  TensorDict({"c": torch.ones(3)}, [])], 0)
        assert [t.shape[0] for t in store["c"].unbind()] == [2, 0, 0, 0, 3]
    finally:
        store.drop()


def test_refusals_write_nothing(addr):
    store = TensorDictStore.from_tensordict(lazy_stack(random_stack(random.Random(2), 4), 0),
                                            addr=addr)
    try:
        before = store.to_local()
        with pytest.raises(TypeError, match="cannot be stored"):
            store["obs"] = ["a", torch.ones(2)]
        with pytest.raises(TypeError):  # text rows into a ragged leaf
            store[0:2] = TensorDict({"obs": NonTensorStack("a", "b")}, [2])
        assert_same_stack(store.to_local(), list(before.tensordicts))
        # tdstored itself: a ragged leaf must name its cells' dtype, have a
        # batch dim and slots; it is never created from rows.
        native = store._dict
        rows = torch.zeros(4, 16, dtype=torch.uint8)
        for bad_value, shape in ((b"", (4, 16)), (b"pickle", (4, 16)), (b"float32", (4, 0))):
            with pytest.raises(tdstore.InvalidArgumentError):
                native.write([(("z",), "uint8", shape, rows.data_ptr(),
                               0 if shape[-1] == 0 else rows.numel(), "ragged", bad_value)])
        # Rows name their cells' dtype: another than the leaf's, or none, is
        # refused, and so is a new ragged leaf from rows that name none.
        slot = store._describe_full()[("obs",)][1][-1]
        rows = torch.zeros(2, slot, dtype=torch.uint8)
        for bad_value in (b"int64", b""):
            with pytest.raises(tdstore.InvalidArgumentError, match="cells"):
                native.write([(("obs",), "uint8", (2, slot), rows.data_ptr(), rows.numel(),
                               "ragged", bad_value)], [("slice", 0, 2, 1)])
        with pytest.raises(tdstore.InvalidArgumentError):
            native.write([(("z",), "uint8", (2, slot), rows.data_ptr(), rows.numel(), "ragged",
                           b"")], [("slice", 0, 2, 1)])
        assert "z" not in store.keys()
        assert_same_stack(store.to_local(), list(before.tensordicts))
    finally:
        store.drop()


def test_a_corrupt_cell_is_data_loss(addr):
    store = TensorDictStore(batch_size=[2], addr=addr)
    try:
        rows = torch.zeros(2, 16, dtype=torch.uint8)
        rows[1, 0] = 12  # length 12: a cell claiming 3 dims in 12 bytes
        rows[1, 4] = 3
        store._dict.write([(("r",), "uint8", (2, 16), rows.data_ptr(), rows.numel(), "ragged",
                            b"float32")])
        assert store[0]["r"].shape == torch.Size([0])
        with pytest.raises(tdstore.DataLossError):
            store["r"]
    finally:
        store.drop()


def _child_reads(handles, queue):
    mixed, episode = handles
    store = TensorDictStore.from_store(mixed)
    local = store.to_local()
    out = []
    for i in range(local.batch_size[0]):
        e = local[i]
        out.append({str(k): plain(e.get(k)) for k in leaf_keys(e)})
    import _helpers  # noqa: F401 - the class is imported here, so from_store uses it

    ep = TensorDictStore.from_store(episode)
    queue.put((type(local).__name__, out, type(ep).__name__,
               ep.obs.tolist(), ep.name, ep.info))


def test_another_process_reads_a_lazy_stack_non_tensors_and_a_tensorclass(addr):
    """The issue's "done when": tensors, a NonTensorStack of strings and a lazy
    stack with per-element shapes in one TensorDict, and a tensorclass, read
    back equal from another process."""
    from _helpers import Episode
    rng = random.Random(5)
    n = 6
    elements = random_stack(rng, n)
    for i, e in enumerate(elements):
        e["text"] = f"row {i} é"
        e["dense"] = torch.full((2,), float(i))
    local = lazy_stack(elements, 0)
    g = torch.Generator().manual_seed(1)
    episode = Episode(obs=torch.randn(n, 3, generator=g), reward=torch.randn(n, generator=g),
                      name="ep", info={"k": [1, 2]}, batch_size=[n])
    store = TensorDictStore.from_tensordict(local, addr=addr)
    stored_episode = TensorDictStore.from_tensordict(episode, addr=addr)
    try:
        assert {kind for _, _, kind, _ in store._describe_full().values()} == {"ragged", "tensor",
                                                                               "text"}
        ctx = worker_context()
        queue = ctx.Queue()
        child = ctx.Process(target=_child_reads,
                            args=((store.handle, stored_episode.handle), queue))
        child.start()
        kind, rows, class_name, obs, name, info = queue.get(timeout=60)
        child.join(30)
        assert child.exitcode == 0
        assert kind == "LazyStackedTensorDict"
        assert len(rows) == n
        for got, want in zip(rows, elements):
            assert got == {str(k): plain(want.get(k)) for k in leaf_keys(want)}
            assert "text" in got
        assert class_name == "Episode"
        assert obs == episode.obs.tolist() and name == "ep" and info == {"k": [1, 2]}
    finally:
        store.drop()
        stored_episode.drop()


def test_leaves_that_change_kind_keys_dtypes_and_two_batch_dims(addr):
    """What a reviewer found: a leaf that stops being ragged takes tensor rows
    again; items() gives the public form; keys some elements lack are
    refused; cells of mixed dtypes promote as torch.stack does; a lazy stack
    of lazy stacks (two batch dims) goes in, and what it reads back goes in
    again; set_ in place cuts and casts; dtypes torch has no nested tensor of
    read as lists; a locked dict keeps a ragged leaf's dtype."""
    store = TensorDictStore(batch_size=[3], addr=addr)
    try:
        store["obs"] = [torch.ones(2), torch.ones(3), torch.ones(1)]
        store["obs"] = torch.zeros(3, 5)  # a tensor leaf again
        store[0] = TensorDict({"obs": torch.ones(5)}, [])
        assert torch.equal(store["obs"][0], torch.ones(5))
        assert store.entry_class("obs") is torch.Tensor
        del store["obs"]
        store[torch.tensor([1])] = TensorDict({"obs": torch.ones(1, 4)}, [1])
        assert store._describe_full()[("obs",)][2] == "tensor"  # rows of a new key: a tensor

        store["r"] = [torch.arange(2), torch.full((3,), 0.5), torch.arange(1)]
        assert store["r"].dtype == torch.float32  # int64 and float32 promote
        assert torch.equal(store["r"].unbind()[1], torch.full((3,), 0.5))
        assert dict(store.items())["r"].is_nested  # items(): the public form
        assert store.entry_class("r") is torch.Tensor

        store.set_("r", torch.ones(3, 2, dtype=torch.float64))  # in place: cells, cast
        assert [t.tolist() for t in store["r"].unbind()] == [[1.0, 1.0]] * 3
        assert store["r"].dtype == torch.float32

        store["u"] = [torch.ones(2, dtype=torch.uint16), torch.ones(1, dtype=torch.uint16),
                      torch.ones(3, dtype=torch.uint16)]
        got = store["u"]
        assert isinstance(got, list) and [t.dtype for t in got] == [torch.uint16] * 3

        with pytest.raises(ValueError, match="same keys"):
            store.update(lazy_stack([TensorDict({"a": torch.ones(2), "b": torch.ones(1)}, []),
                                     TensorDict({"a": torch.ones(3)}, []),
                                     TensorDict({"a": torch.ones(3)}, [])], 0))
        assert "a" not in store.keys()

        store.lock_()
        with pytest.raises(RuntimeError):
            store["r"] = [torch.ones(1, dtype=torch.int64)] * 3  # another cell dtype
        assert store["r"].dtype == torch.float32
        store.unlock_()
    finally:
        store.drop()

    rows = [lazy_stack([TensorDict({"x": torch.ones(i + j + 1)}, []) for j in range(2)], 0)
            for i in range(3)]
    local = lazy_stack(rows, 0)
    store = TensorDictStore.from_tensordict(local, addr=addr)
    try:
        assert store.batch_size == torch.Size([3, 2])
        back = store.to_local()
        for i in range(3):
            for j in range(2):
                assert torch.equal(back[i][j]["x"], torch.ones(i + j + 1))
        again = TensorDictStore.from_tensordict(back, addr=addr)
        try:
            assert torch.equal(again[2, 1]["x"], torch.ones(4))
        finally:
            again.drop()
    finally:
        store.drop()


def test_fills_set_ragged_cells_as_tensordict_fills_a_lazy_stack(addr):
    """fill_, masked_fill_, zero_ and td[idx] = 0 on a store with ragged
    leaves equal the same calls on tensordict's own lazy stack: every
    element of every (selected) cell set, dense leaves too."""
    rng = random.Random(5)
    elements = random_stack(rng, 7)
    local = lazy_stack([e.clone() for e in elements])
    store = TensorDictStore.from_tensordict(lazy_stack([e.clone() for e in elements]), addr=addr)
    try:
        mask = torch.tensor([True, False, True, True, False, False, True])
        # tensordict's own lazy stack refuses fill_ of a key whose cells
        # differ in shape (it stacks them first); the store fills every
        # element of every cell, as filling each stacked TensorDict would.
        for key, value in (("obs", 2.5), (("next", "pix"), 7), ("seq", torch.tensor(3)),
                           ("reward", 1.5)):
            store.fill_(key, value)
            for element in local.tensordicts:
                element.fill_(key, value)
            assert_same_stack(store.to_local(), [local[i] for i in range(7)])
        # The same for masked_fill_: the selected rows' elements.
        store.masked_fill_(mask, -1)
        for i in mask.nonzero().flatten().tolist():
            local[i].apply_(lambda t: t.fill_(-1))
        assert_same_stack(store.to_local(), [local[i] for i in range(7)])
        # tensordict's lazy stack takes td[idx] = 0 as "every leaf of those rows".
        store[torch.tensor([1, 4])] = 0
        for i in (1, 4):
            local[i].apply_(lambda t: t.zero_())
        assert_same_stack(store.to_local(), [local[i] for i in range(7)])
        store.zero_()
        local.zero_()
        assert_same_stack(store.to_local(), [local[i] for i in range(7)])
        with pytest.raises(RuntimeError):
            store.fill_("obs", torch.ones(2))
    finally:
        store.drop()


def test_a_lazy_stack_along_dim_1_keeps_a_tensor_per_cell(addr):
    """A lazy stack along dim 1 whose elements differ in shape (torchrl's
    [env, time] stacks): every batch cell's tensor comes back as it was,
    through whole reads and indexed reads."""
    g = torch.Generator().manual_seed(4)
    local = lazy_stack([TensorDict({"x": torch.randn(2, i + 1, generator=g),
                                    "y": torch.randn(2, 3, generator=g)}, [2])
                        for i in range(3)], 1)
    store = TensorDictStore.from_tensordict(local, addr=addr)
    try:
        assert store.batch_size == torch.Size([2, 3])
        assert torch.equal(store["y"], local["y"])
        for row in range(2):
            for col in range(3):
                assert torch.equal(store[row, col]["x"], local[row, col]["x"]), (row, col)
        got = store[torch.tensor([1, 0])]
        for row, want_row in enumerate((1, 0)):
            for col in range(3):
                assert torch.equal(got[row, col]["x"], local[want_row, col]["x"])
    finally:
        store.drop()

"""Record dicts (``TensorDictStore(..., layout="record")``): each row's
leaves kept together in tdstored. On both back ends: random indexed reads
and writes match a local TensorDict (tensordict's own semantics), whole
leaves read back right, what a formed record cannot take is refused with
nothing written, and torchrl's replay buffer on TdStoreStorage (record by
default) samples the rows it was given."""

import random

import pytest
import torch
from tensordict import TensorDict

import tdstore
from _helpers import random_index


def _rows(gen: torch.Generator, n: int) -> TensorDict:
    # Integer-valued floats: exact, no NaN to compare.
    return TensorDict({
        "obs": torch.randint(0, 1000, (n, 6), generator=gen).float(),
        "action": torch.randint(0, 9, (n, 2), generator=gen),
        "reward": torch.randint(0, 50, (n,), generator=gen).to(torch.float16),
        ("next", "done"): torch.randint(0, 2, (n, 1), generator=gen).bool(),
    }, [n])



def _assert_same(got: TensorDict, want: TensorDict, what):
    assert set(got.keys(True, True)) == set(want.keys(True, True)), what
    for key in want.keys(True, True):
        assert got[key].dtype == want[key].dtype, (what, key)
        assert torch.equal(got[key], want[key]), (what, key)


def test_random_rows_match_a_local_tensordict(new_store):
    rng = random.Random(5)
    gen = torch.Generator().manual_seed(5)
    n = 41
    model = _rows(gen, n)
    store = new_store((n,), rows_per_block=8, layout="record")
    assert store.layout == "record"
    store[:] = model  # forms the record from the first indexed write
    for step in range(50):
        idx = random_index(rng, n)
        selected = model[idx]
        if rng.random() < 0.5:
            values = _rows(gen, 1)[0] if selected.batch_dims == 0 else _rows(gen, selected.shape[0])
            store[idx] = values
            model[idx] = values
        read = random_index(rng, n)
        got = store[read]
        _assert_same(got.to_local() if hasattr(got, "to_local") else got, model[read], step)
    _assert_same(store.to_local(), model, "whole leaves")
    assert torch.equal(store["obs"], model["obs"])


def test_a_record_dict_of_two_batch_dims_matches_a_local_tensordict(new_store):
    """A record is a row of batch dim 0 with every leaf's cells of the other
    batch dims in it (a [time, env] replay buffer): random reads and writes
    over both dims, then a resize of dim 0, match a local TensorDict."""
    rng = random.Random(11)
    gen = torch.Generator().manual_seed(11)
    n, envs = 23, 3
    model = _rows(gen, n * envs).reshape(n, envs)
    store = new_store((n, envs), rows_per_block=4, layout="record")
    store[:] = model
    for step in range(40):
        # Over dim 1 an int or a slice (two position tensors would have to
        # broadcast together).
        env = rng.choice([rng.randrange(envs), slice(rng.randrange(envs), None)])
        idx = (random_index(rng, n), env) if rng.random() < 0.5 else random_index(rng, n)
        selected = model[idx]
        if rng.random() < 0.5:
            values = _rows(gen, max(selected.numel(), 1)).reshape(selected.shape) \
                if selected.batch_dims else _rows(gen, 1)[0]
            store[idx] = values
            model[idx] = values
        read = (random_index(rng, n), slice(None)) if rng.random() < 0.5 else random_index(rng, n)
        got = store[read]
        _assert_same(got.to_local() if hasattr(got, "to_local") else got, model[read], step)
    _assert_same(store.to_local(), model, "whole leaves")
    store.resize_(n + 5)
    grown = torch.cat([model, torch.zeros_like(model[:5])])
    _assert_same(store.to_local(), grown, "after the resize")


def test_a_formed_record_keeps_its_leaves_by_rows_and_new_keys_beside_it(client):
    store = tdstore.TensorDictStore.from_schema(
        {"obs": ((4,), torch.float32), "action": ((), torch.int64)}, batch_size=[10],
        client=client, layout="record")
    try:
        assert store.layout == "record"
        store[2:5] = TensorDict({"obs": torch.ones(3, 4), "action": torch.arange(3)}, [3])
        before = store.to_local()
        # The record's leaves are written by rows: refused whole or filled,
        # with nothing written.
        with pytest.raises(tdstore.FailedPreconditionError, match="record"):
            store["obs"] = torch.zeros(10, 4)
        with pytest.raises(tdstore.FailedPreconditionError):
            store.zero_()
        assert sorted(store.keys()) == ["action", "obs"]
        _assert_same(store.to_local(), before, "after refusals")
        # A new key is made beside the record, zero-filled elsewhere, as in a
        # default dict; a row write of every leaf then takes both.
        store[0] = TensorDict({"new": torch.ones(())}, [])
        store[7] = TensorDict({"obs": torch.full((4,), 2.0), "action": torch.tensor(9),
                               "new": torch.tensor(3.0)}, [])
        want = before.clone()
        want["new"] = torch.zeros(10)
        want["new"][0], want["new"][7] = 1.0, 3.0
        want[7] = TensorDict({"obs": torch.full((4,), 2.0), "action": torch.tensor(9),
                              "new": torch.tensor(3.0)}, [])
        _assert_same(store.to_local(), want, "a new key")
        _assert_same(store[torch.tensor([7, 0, 3])], want[torch.tensor([7, 0, 3])], "rows")
        store["new"] = torch.arange(10.0)  # a leaf outside the record is written whole
        del store["obs"]
        want["new"] = torch.arange(10.0)
        del want["obs"]
        _assert_same(store.to_local(), want, "after a whole write and a delete")
    finally:
        client.drop(store.name)


def test_text_outgrowing_its_slots_is_refused_with_nothing_written(client):
    from tensordict import NonTensorData, NonTensorStack

    store = tdstore.TensorDictStore(batch_size=[4], client=client, layout="record")
    try:
        store[0:2] = TensorDict({"x": torch.ones(2), "t": NonTensorStack("ab", "cd")}, [2])
        before = store.to_local()
        with pytest.raises(tdstore.FailedPreconditionError, match="record"):
            store[1] = TensorDict({"x": torch.zeros(()), "t": NonTensorData("y" * 100)}, [])
        after = store.to_local()
        assert torch.equal(after["x"], before["x"])
        assert after[0:2]["t"] == ["ab", "cd"]
    finally:
        client.drop(store.name)


@pytest.mark.parametrize("layout", ["record", "leaves"])
def test_replay_buffer_on_record_storage_samples_its_rows(addr, client, layout):
    from torchrl.data import ReplayBuffer
    from torchrl.data.replay_buffers.samplers import RandomSampler

    from tdstore.torchrl import TdStoreStorage, TdStoreWriter

    storage = TdStoreStorage(64, addr=addr, layout=layout)
    rb = ReplayBuffer(storage=storage, writer=TdStoreWriter(), sampler=RandomSampler(),
                      batch_size=32)
    try:
        gen = torch.Generator().manual_seed(2)
        data = _rows(gen, 100)
        data["index"] = torch.arange(100)
        for start in range(0, 100, 25):
            rb.extend(data[start:start + 25])
        assert storage.store.layout == layout
        assert len(rb) == 64
        sample = rb.sample()
        for i, row in enumerate(sample["index"].tolist()):
            assert row >= 36  # the ring kept the last 64 rows
            _assert_same(sample[i].exclude("index"), data[row].exclude("index"), row)
    finally:
        client.drop(storage.name)

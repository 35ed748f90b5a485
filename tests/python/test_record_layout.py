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


def test_a_formed_record_refuses_new_and_whole_leaves_writing_nothing(client):
    store = tdstore.TensorDictStore.from_schema(
        {"obs": ((4,), torch.float32), "action": ((), torch.int64)}, batch_size=[10],
        client=client, layout="record")
    try:
        assert store.layout == "record"
        store[2:5] = TensorDict({"obs": torch.ones(3, 4), "action": torch.arange(3)}, [3])
        before = store.to_local()
        with pytest.raises(tdstore.FailedPreconditionError, match="record"):
            store["obs"] = torch.zeros(10, 4)
        with pytest.raises(tdstore.FailedPreconditionError, match="record"):
            store[0] = TensorDict({"new": torch.ones(())}, [])
        with pytest.raises(tdstore.FailedPreconditionError):
            store.zero_()
        assert sorted(store.keys()) == ["action", "obs"]
        _assert_same(store.to_local(), before, "after refusals")
        # Rows still go in, and a leaf can go.
        store[7] = TensorDict({"obs": torch.full((4,), 2.0), "action": torch.tensor(9)}, [])
        del store["obs"]
        want = before["action"].clone()
        want[7] = 9
        assert torch.equal(store["action"], want)
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

"""Tensorclasses: from_tensordict(tc) stores the fields (non-tensor ones as
non-tensor leaves) and records the class; from_store gives back an instance
of the same class wrapping the store (another process:
test_non_tensor.py's test_another_process_reads_...)."""

import pytest
import torch
from tensordict import TensorDict

from tdstore import TensorDictStore
from tdstore._store import TENSORCLASS_ATTR
from _helpers import Episode


def _episode(n=6):
    g = torch.Generator().manual_seed(2)
    return Episode(obs=torch.randn(n, 3, generator=g), reward=torch.randn(n, generator=g),
                   name="ep-1", info={"seed": 2, "tags": ["a"]}, batch_size=[n])


def assert_same_episode(got, want):
    assert type(got) is type(want)
    assert got.batch_size == want.batch_size
    assert torch.equal(got.obs, want.obs) and torch.equal(got.reward, want.reward)
    assert got.name == want.name and got.info == want.info


def test_a_tensorclass_comes_back_as_itself_wrapping_the_store(addr):
    ep = _episode()
    stored = TensorDictStore.from_tensordict(ep, addr=addr)
    store = stored._tensordict
    try:
        assert isinstance(store, TensorDictStore)
        assert store.attrs[TENSORCLASS_ATTR] == "_helpers:Episode"
        assert_same_episode(stored, ep)
        opened = TensorDictStore.from_store(store.handle)
        assert_same_episode(opened, ep)
        assert isinstance(opened._tensordict, TensorDictStore)  # a view, not a copy
        # Writes through the instance land in the store.
        opened.reward[:] = 0  # a local tensor: no effect, as with any store read
        opened[1:3] = Episode(obs=torch.ones(2, 3), reward=torch.full((2,), 5.0),
                              name="ep-1", info={"seed": 2, "tags": ["a"]}, batch_size=[2])
        assert torch.equal(store["reward"][1:3], torch.full((2,), 5.0))
        assert torch.equal(TensorDictStore.from_store(store.name, addr=addr).obs[1],
                           torch.ones(3))
        # Indexing gives the class too.
        row = opened[2]
        assert type(row) is Episode and row.name == "ep-1"
        # The overrides.
        assert isinstance(TensorDictStore.from_store(store.handle, tensorclass_cls=False),
                          TensorDictStore)
        as_td = TensorDictStore.from_store(store.handle, tensorclass_cls=Episode)
        assert type(as_td) is Episode
    finally:
        store.drop()


def test_a_class_that_cannot_be_imported_gives_the_store_and_says_why(addr):
    store = TensorDictStore.from_tensordict(TensorDict({"x": torch.zeros(2)}, [2]), addr=addr)
    try:
        store.attrs[TENSORCLASS_ATTR] = "no_such_module_tdstore:Thing"
        with pytest.warns(UserWarning, match="cannot be imported"):
            opened = TensorDictStore.from_store(store.handle)
        assert isinstance(opened, TensorDictStore)
        store.attrs[TENSORCLASS_ATTR] = "torch:Tensor"  # importable, not a tensorclass
        with pytest.warns(UserWarning, match="not a tensorclass"):
            assert isinstance(TensorDictStore.from_store(store.handle), TensorDictStore)
    finally:
        store.drop()

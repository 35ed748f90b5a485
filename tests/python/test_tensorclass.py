"""Tensorclasses, beside tensordict's own store (the seed, over redis-py, on
the standalone back end's redis-server): from_tensordict(tc) stores the
fields and records the class and returns the store; from_store gives back an
instance of the class wrapping the store. ``tensorclass_cls`` takes a class,
a string (imported: the caller asked), None (the recorded class, only from a
module already imported) or False. Another process:
test_non_tensor.py's test_another_process_reads_...)."""

import sys
import textwrap

import pytest
import torch
from tensordict import TensorDict
from tensordict.store import TensorDictStore as SeedStore

from tdstore import TensorDictStore
from tdstore._store import TENSORCLASS_ATTR
from _helpers import Episode


def _episode(n=6, seed=2):
    g = torch.Generator().manual_seed(seed)
    return Episode(obs=torch.randn(n, 3, generator=g), reward=torch.randn(n, generator=g),
                   name="ep-1", info={"seed": seed, "tags": ["a"]}, batch_size=[n])


def assert_same_episode(got, want):
    assert type(got) is type(want)
    assert got.batch_size == want.batch_size
    assert torch.equal(got.obs, want.obs) and torch.equal(got.reward, want.reward)
    assert got.name == want.name and got.info == want.info


@pytest.fixture
def seed_port(standalone_redis_port):
    return standalone_redis_port


def test_from_tensordict_returns_the_store_and_from_store_the_class_as_the_seed_does(
        addr, seed_port):
    ep = _episode()
    seed = SeedStore.from_tensordict(ep, host="127.0.0.1", port=seed_port)
    ours = TensorDictStore.from_tensordict(ep, addr=addr)
    try:
        # The seed gives its store back, and so do we.
        assert isinstance(seed, SeedStore) and isinstance(ours, TensorDictStore)
        assert ours.attrs[TENSORCLASS_ATTR] == "_helpers:Episode"
        for spelling in (None, Episode, "_helpers.Episode"):
            seed_back = SeedStore.from_store(host="127.0.0.1", port=seed_port,
                                             td_id=seed._td_id, tensorclass_cls=spelling)
            back = TensorDictStore.from_store(ours._td_id, addr=addr, tensorclass_cls=spelling)
            assert type(back) is type(seed_back) is Episode, spelling
            assert_same_episode(seed_back, ep)
            assert_same_episode(back, ep)
        assert isinstance(back._tensordict, TensorDictStore)  # a view, not a copy
        # Writes through the instance land in the store.
        back[1:3] = Episode(obs=torch.ones(2, 3), reward=torch.full((2,), 5.0),
                            name="ep-1", info={"seed": 2, "tags": ["a"]}, batch_size=[2])
        assert torch.equal(ours["reward"][1:3], torch.full((2,), 5.0))
        assert torch.equal(TensorDictStore.from_store(ours.name, addr=addr).obs[1],
                           torch.ones(3))
        row = back[2]
        assert type(row) is Episode and row.name == "ep-1"
        # False: the store itself, in both.
        assert isinstance(TensorDictStore.from_store(ours.handle, tensorclass_cls=False),
                          TensorDictStore)
        assert type(TensorDictStore.from_store(ours.handle, tensorclass_cls="_helpers:Episode")
                    ) is Episode
    finally:
        ours.drop()
        seed.clear_redis()


def test_a_recorded_class_is_never_imported_unasked(addr, tmp_path, monkeypatch):
    """The class a dict records is looked up among the modules this process
    has imported: data in a store never makes it import code. Naming the class
    as a string is the caller's permission to import it."""
    module = "tdstore_probe_tc_module"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent("""
        import torch
        from tensordict import tensorclass

        @tensorclass
        class Probe:
            x: torch.Tensor
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    store = TensorDictStore.from_tensordict(TensorDict({"x": torch.arange(4.0)}, [4]),
                                            addr=addr)
    try:
        store.attrs[TENSORCLASS_ATTR] = f"{module}:Probe"
        with pytest.warns(UserWarning, match="not imported"):
            opened = TensorDictStore.from_store(store.handle)
        assert isinstance(opened, TensorDictStore)
        assert module not in sys.modules
        probe = TensorDictStore.from_store(store.handle, tensorclass_cls=f"{module}.Probe")
        assert module in sys.modules and type(probe).__name__ == "Probe"
        assert torch.equal(probe.x, torch.arange(4.0))
        # Now imported: the recorded class is used.
        assert type(TensorDictStore.from_store(store.handle)) is type(probe)
    finally:
        sys.modules.pop(module, None)
        store.drop()


def test_bad_tensorclass_names_are_refused_or_warned(addr):
    store = TensorDictStore.from_tensordict(TensorDict({"x": torch.zeros(2)}, [2]), addr=addr)
    try:
        with pytest.raises(ImportError, match="no_such_module_tdstore"):
            TensorDictStore.from_store(store.handle, tensorclass_cls="no_such_module_tdstore.X")
        with pytest.raises(TypeError, match="not a tensorclass"):
            TensorDictStore.from_store(store.handle, tensorclass_cls="torch.Tensor")
        with pytest.raises(TypeError, match="not a tensorclass"):
            TensorDictStore.from_store(store.handle, tensorclass_cls=dict)
        store.attrs[TENSORCLASS_ATTR] = "torch:Tensor"  # imported, not a tensorclass
        with pytest.warns(UserWarning, match="not a tensorclass"):
            assert isinstance(TensorDictStore.from_store(store.handle), TensorDictStore)
    finally:
        store.drop()

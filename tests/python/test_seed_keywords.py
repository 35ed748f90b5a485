"""The seed's constructor keywords (tensordict.store.TensorDictStore's), on
tdstore: what each means here, checked beside the seed itself (over redis-py,
on the standalone back end's redis-server) where both can do it. An unknown
or refused keyword raises before anything is created."""

import random

import pytest
import torch
from tensordict import TensorDict
from tensordict.store import TensorDictStore as SeedStore

import tdstore
from tdstore import TensorDictStore
from tdstore._connect import split_options


def _names(addr):
    return set(tdstore.Client(addr).list())


def test_td_id_reopens_existing_data_as_the_seed_does(addr, standalone_redis_port):
    rng = random.Random(5)
    n = rng.randint(2, 9)
    obs = torch.randn(n, 3)
    seed = SeedStore(host="127.0.0.1", port=standalone_redis_port, batch_size=[n])
    ours = TensorDictStore(addr=addr, batch_size=[n])
    try:
        seed["obs"] = obs
        ours["obs"] = obs
        seed_again = SeedStore(host="127.0.0.1", port=standalone_redis_port, batch_size=[n],
                               td_id=seed._td_id)
        again = TensorDictStore(addr=addr, batch_size=[n], td_id=ours._td_id)
        assert torch.equal(seed_again["obs"], obs) and torch.equal(again["obs"], obs)
        # Without a batch size, ours takes the stored one.
        assert TensorDictStore(addr=addr, td_id=ours._td_id).batch_size == torch.Size([n])
        # A new td_id creates a dict of that name.
        fresh = TensorDictStore(addr=addr, batch_size=[2], td_id=f"{ours.name}-new")
        assert fresh.name == f"{ours.name}-new" and fresh.batch_size == torch.Size([2])
        fresh.drop()
        # A different batch size is refused, and changes nothing.
        with pytest.raises(ValueError, match="holds batch size"):
            TensorDictStore(addr=addr, batch_size=[n + 1], td_id=ours._td_id)
        assert ours.batch_size == torch.Size([n]) and torch.equal(ours["obs"], obs)
    finally:
        ours.drop()
        seed.clear_redis()


def test_host_port_and_unix_socket_name_the_tdstored(addr):
    if addr.startswith("unix://"):  # $TDSTORE_TEST_TRANSPORT=unix
        where = {"unix_socket_path": addr[len("unix://"):]}
        host = "localhost"
    else:
        host, port = addr.rsplit(":", 1)
        where = {"host": host, "port": int(port)}
    td = TensorDictStore(**where, batch_size=[2])
    try:
        assert td.client.address == addr
        assert TensorDictStore.from_store(td._td_id, **where).name == td.name
        with pytest.raises(TypeError, match="not both"):
            TensorDictStore(addr=addr, host=host, batch_size=[2])
        with pytest.raises(TypeError, match="pass one"):
            TensorDictStore(host=host, unix_socket_path="/tmp/x.sock", batch_size=[2])
    finally:
        td.drop()
    assert split_options(None, {"unix_socket_path": "/run/td.sock"})[0] == "unix:///run/td.sock"
    assert split_options(None, {"host": "h"})[0] == "h:50051"


@pytest.mark.parametrize("kwargs, match", [
    ({"backend": "redis"}, "backend='tdstore'"),
    ({"backend": "dragonfly"}, "backend='tdstore'"),
    ({"backend": "memcached"}, "not a tdstore back end"),
    ({"db": 3}, "tdstored --redis"),
    ({"prefix": "mine"}, "tdstored --namespace"),
])
def test_seed_keywords_tdstore_cannot_honour_are_refused_and_create_nothing(addr, kwargs, match):
    before = _names(addr)
    with pytest.raises(ValueError, match=match):
        TensorDictStore(addr=addr, batch_size=[2], **kwargs)
    with pytest.raises(ValueError, match=match):
        TensorDictStore.from_dict({"a": torch.zeros(2)}, batch_size=[2], addr=addr, **kwargs)
    assert _names(addr) == before


def test_the_seeds_defaults_are_accepted(addr):
    td = TensorDictStore(addr=addr, batch_size=[2], backend="tdstore", db=0,
                         prefix="tensordict", cache_metadata=True)
    td.drop()


def test_unknown_keywords_are_refused_naming_them_and_create_nothing(addr):
    before = _names(addr)
    with pytest.raises(TypeError, match="no_such_option"):
        TensorDictStore(addr=addr, batch_size=[2], no_such_option=1)
    with pytest.raises(TypeError, match="no_such_option"):
        TensorDictStore.from_tensordict(TensorDict({"a": torch.zeros(2)}, [2]), addr=addr,
                                        no_such_option=1)
    assert _names(addr) == before


def test_cache_metadata_false_asks_tdstored_every_time(addr):
    """cache_metadata=False is watch_schemas=False: keys come from tdstored."""
    td = TensorDictStore(addr=addr, batch_size=[2], cache_metadata=False)
    try:
        assert td.client.options["watch_schemas"] is False
        other = TensorDictStore.from_store(td.name, addr=addr)
        other["k"] = torch.zeros(2)
        assert "k" in td and list(td.keys()) == ["k"]
        with pytest.raises(ValueError, match="cache_metadata"):
            TensorDictStore.from_store(td.name, client=other.client, cache_metadata=False)
    finally:
        td.drop()


def test_a_missing_dict_says_the_seeds_words_name_and_address(addr, standalone_redis_port):
    with pytest.raises(KeyError, match="No TensorDictStore with td_id='nope-"):
        SeedStore.from_store(host="127.0.0.1", port=standalone_redis_port, td_id="nope-1")
    with pytest.raises(KeyError, match="No TensorDictStore with td_id='nope-1'") as err:
        TensorDictStore.from_store(td_id="nope-1", addr=addr)
    assert addr in str(err.value)


def test_a_refused_upload_into_a_reopened_dict_leaves_it_as_it_was(addr):
    """from_tensordict(..., td_id=existing) reopens the dict; when the write is
    refused (here: a new key into a locked dict), the dict and its data stay
    (a dict the call made itself is dropped: test_bad_input.py)."""
    keep = TensorDictStore.from_tensordict(TensorDict({"keep": torch.arange(4.0)}, [4]),
                                           addr=addr)
    try:
        keep.lock_()
        with pytest.raises(RuntimeError):
            TensorDictStore.from_tensordict(TensorDict({"new": torch.ones(4)}, [4]),
                                            addr=addr, td_id=keep.name)
        again = TensorDictStore.from_store(keep.name, addr=addr)
        assert list(again.keys()) == ["keep"]
        assert torch.equal(again["keep"], torch.arange(4.0))
        keep.unlock_()
    finally:
        keep.drop()

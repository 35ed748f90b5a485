"""tdstore.Client: list, create/open, rename, drop, server_info."""

import pytest
import torch

import tdstore
from tdstore import TensorDictStore


def test_server_info_names_the_back_end(client, request):
    info = client.server_info()
    assert info["redis_ok"] is True and info["version"]
    backend = request.node.callspec.params["addr"]
    if backend == "cluster":
        assert info["redis_masters"] == 3 and "cluster" in info["backend"]
    else:
        assert info["redis_masters"] == 1 and "standalone" in info["backend"]


def test_create_open_rename_drop(client):
    name = f"py-client-{id(client)}"
    d = client.create(name, [3], [(("obs",), "float32", [2])])
    assert d.name == name and name in client.list()
    td = TensorDictStore.from_store(name, client=client)
    assert torch.equal(td["obs"], torch.zeros(3, 2))  # pre-allocated, zero-filled
    client.rename(name, name + "-renamed")
    assert name not in client.list() and name + "-renamed" in client.list()
    # A wrapper opened under the old name no longer reaches the dict (tdstored
    # checks name and id); open it again under its new name.
    with pytest.raises(KeyError):
        td["obs"]
    td = TensorDictStore.from_store(name + "-renamed", client=client)
    assert torch.equal(td["obs"], torch.zeros(3, 2))
    other = client.create(name + "-other", [1])
    with pytest.raises(tdstore.AlreadyExistsError):
        client.rename(name + "-renamed", other.name)
    client.drop(other.name)
    client.drop(name + "-renamed")
    with pytest.raises(KeyError):
        client.drop(name + "-renamed")
    with pytest.raises(KeyError):
        td["obs"]


def test_a_held_store_never_touches_the_namesake_that_replaced_it(client):
    name = f"py-namesake-{id(client)}"
    old = TensorDictStore(batch_size=[4], client=client, name=name)
    old["x"] = torch.arange(8.0).reshape(4, 2)
    handle = old.handle
    assert torch.equal(old["x"], torch.arange(8.0).reshape(4, 2))  # tdstored caches its schema
    client.drop(name)
    now = TensorDictStore(batch_size=[4], client=client, name=name)
    now["x"] = torch.full((4, 2), 5.0)
    stale_calls = {
        "get": lambda: old["x"],
        "set": lambda: old.set("x", torch.zeros(4, 2)),
        "new leaf": lambda: old.set("fresh", torch.zeros(4)),
        "indexed get": lambda: old[1:3],
        "indexed set": lambda: old.__setitem__(slice(0, 2), now[0:2]),
        "keys": lambda: list(old.keys()),
        "contains": lambda: "x" in old,
        "del": lambda: old.del_("x"),
        "from handle": lambda: TensorDictStore.from_store(handle, client=client),
        "drop": lambda: old.drop(),
    }
    for what, call in stale_calls.items():
        with pytest.raises(KeyError):
            call()
            pytest.fail(f"{what} reached the namesake")
    assert list(now.keys()) == ["x"]
    assert torch.equal(now["x"], torch.full((4, 2), 5.0))
    now.drop()


def test_client_and_addr_must_agree(client):
    with pytest.raises(ValueError, match="client="):
        TensorDictStore(batch_size=[1], client=client, addr="10.0.0.1:1")
    with pytest.raises(TypeError):
        TensorDictStore(batch_size=[1], client=client, token="x")


def test_store_with_addr_and_options(addr):
    td = TensorDictStore(batch_size=[2], addr=addr, timeout=30.0, retry_for=5.0)
    try:
        td["a"] = torch.ones(2)
        assert td.client.address == addr
        assert td.client.options == {"timeout": 30.0, "retry_for": 5.0}
        assert torch.equal(TensorDictStore.from_store(td.handle, timeout=30.0)["a"], torch.ones(2))
    finally:
        td.drop()


def test_keys_view_is_live(new_store):
    td = new_store([2])
    keys = td.keys()
    assert list(keys) == [] and len(keys) == 0
    td["a"] = torch.zeros(2)
    assert list(keys) == ["a"] and len(keys) == 1 and "a" in keys

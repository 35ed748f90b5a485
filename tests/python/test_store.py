"""TensorDictStore behaviour, on both back ends, against a local TensorDict where one applies."""

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

import tdstore
from tdstore import TensorDictStore
from _helpers import assert_td_equal


def sample_local(n=5):
    g = torch.Generator().manual_seed(0)
    return TensorDict(
        {
            "obs": torch.randn(n, 3, generator=g),
            "action": torch.randint(0, 9, (n,), generator=g),
            "bf": torch.randn(n, 2, generator=g).to(torch.bfloat16),
            "cplx": torch.randn(n, 2, dtype=torch.complex64, generator=g),
            "next": {"obs": torch.randn(n, 3, generator=g),
                     "done": torch.rand(n, generator=g) > 0.5,
                     "deep": {"x": torch.arange(n, dtype=torch.int16)}},
        },
        batch_size=[n],
    )


# ---- creating and opening ----------------------------------------------------

def test_is_a_tensordictbase_with_a_fresh_name(client, new_store):
    a, b = new_store([3]), new_store([3])
    assert isinstance(a, TensorDictBase)
    assert a.name != b.name and a.name in client.list()
    assert a.batch_size == torch.Size([3]) and a.batch_dims == 1
    assert a.is_contiguous() is False
    assert list(a.keys()) == []


def test_named_create_and_from_store_by_name_and_handle(client, new_store, addr):
    td = new_store([4], name=f"py-named-{id(client)}")
    td["x"] = torch.arange(4)
    by_name = TensorDictStore.from_store(td.name, addr=addr)
    assert by_name.batch_size == torch.Size([4]) and by_name.name == td.name
    assert torch.equal(by_name["x"], torch.arange(4))
    by_handle = TensorDictStore.from_store(td.handle)
    assert torch.equal(by_handle["x"], torch.arange(4))
    assert torch.equal(tdstore.open_handle(td.handle)["x"], torch.arange(4))
    assert torch.equal(tdstore.from_store(td.name, client=client)["x"], torch.arange(4))
    assert torch.equal(TensorDictStore.from_redis(td.name, client=client)["x"], torch.arange(4))
    # The seed's spelling.
    assert TensorDictStore.from_store(td_id=td._td_id, client=client).name == td.name


def test_handle_never_opens_a_namesake(client, new_store):
    td = new_store([2], name=f"py-namesake-{id(client)}")
    handle = td.handle
    td.drop()
    again = new_store([2], name=td.name)
    with pytest.raises(KeyError):
        TensorDictStore.from_store(handle)
    assert again.name == td.name


def test_from_dict_and_from_tensordict_round_trip(client):
    local = sample_local()
    for td in (TensorDictStore.from_tensordict(local, client=client),
               TensorDictStore.from_dict(local.to_dict(), batch_size=[5], client=client),
               TensorDictStore.from_dict(local, client=client)):
        try:
            assert_td_equal(td.to_local(), local)
            assert_td_equal(td.to_tensordict(), local)
            assert isinstance(td.contiguous(), TensorDict)
        finally:
            td.drop()
    auto = TensorDictStore.from_dict({"a": torch.zeros(3, 2)}, auto_batch_size=True,
                                     client=client)
    try:
        assert auto.batch_size == torch.Size([3, 2])
    finally:
        auto.drop()


def test_from_tensordict_takes_the_device(client):
    local = TensorDict({"a": torch.zeros(2)}, [2], device="cpu")
    td = TensorDictStore.from_tensordict(local, client=client)
    try:
        assert td.device == torch.device("cpu")
        assert td.to_local().device == torch.device("cpu")
        assert td["a"].device == torch.device("cpu")
    finally:
        td.drop()


# ---- whole leaves and nesting -------------------------------------------------

def test_get_set_str_and_tuple_keys(new_store):
    td = new_store([3])
    td["a"] = torch.arange(3.0)
    td["n", "b"] = torch.ones(3, 2, dtype=torch.int32)
    td.set(("n", "m", "c"), torch.zeros(3, dtype=torch.bool))
    assert torch.equal(td["a"], torch.arange(3.0))
    assert torch.equal(td.get("a"), torch.arange(3.0))
    assert torch.equal(td["n", "b"], torch.ones(3, 2, dtype=torch.int32))
    assert torch.equal(td[("n", ("m", "c"))], torch.zeros(3, dtype=torch.bool))
    assert td.get("missing") is None
    assert td.get("missing", 7) == 7
    with pytest.raises(KeyError):
        td["missing"]
    with pytest.raises(KeyError):
        td["n", "missing"]


def test_set_replaces_dtype_and_shape_like_tensordict(new_store):
    td = new_store([2])
    td["a"] = torch.zeros(2, 3)
    td["a"] = torch.ones(2, dtype=torch.int64)
    assert td["a"].dtype == torch.int64 and td["a"].shape == torch.Size([2])


def test_nested_is_a_live_view(new_store):
    td = new_store([4])
    td["nested"] = TensorDict({"x": torch.zeros(4)}, [4])
    view = td["nested"]
    assert isinstance(view, TensorDictStore) and view.prefix == ("nested",)
    view["y"] = torch.ones(4)  # lands in the store
    view["deeper", "z"] = torch.full((4,), 2.0)
    assert torch.equal(td["nested", "y"], torch.ones(4))
    assert torch.equal(td["nested", "deeper", "z"], torch.full((4,), 2.0))
    assert sorted(view.keys()) == ["deeper", "x", "y"]
    assert_td_equal(view.to_local(), TensorDict(
        {"x": torch.zeros(4), "y": torch.ones(4), "deeper": {"z": torch.full((4,), 2.0)}}, [4]))
    # Indexed reads and writes through the view see only its sub-dict.
    view[1] = {"x": torch.tensor(5.0)}
    assert td["nested", "x"].tolist() == [0, 5, 0, 0]
    assert sorted(view[2:].keys()) == ["deeper", "x", "y"]
    # popitem on a view pops from the sub-dict.
    key, value = view.popitem()
    assert key == "y" and torch.equal(value, torch.ones(4)) and "y" not in view
    view["y"] = torch.ones(4)
    # Another wrapper sees the view's writes.
    other = TensorDictStore.from_store(td.handle)
    assert torch.equal(other["nested"]["y"], torch.ones(4))


def test_set_a_tensordict_value_and_a_dict_value(new_store):
    td = new_store([2])
    td["sub"] = TensorDict({"a": torch.ones(2), "b": {"c": torch.zeros(2, 1)}}, [2])
    td["d"] = {"e": torch.arange(2)}
    assert sorted(td.keys(True, True)) == sorted([("sub", "a"), ("sub", "b", "c"), ("d", "e")])


def test_zero_byte_leaves_bfloat16_complex_and_0d(new_store, client):
    td = new_store([0])
    td["empty"] = torch.zeros(0, 3)
    assert td["empty"].shape == torch.Size([0, 3])
    assert td.to_local()["empty"].shape == torch.Size([0, 3])
    scalar = new_store([])
    scalar["s"] = torch.tensor(3.5, dtype=torch.float64)
    scalar["bf"] = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    scalar["c"] = torch.tensor([1 + 2j], dtype=torch.complex128)
    assert scalar["s"].shape == torch.Size([]) and scalar["s"].item() == 3.5
    assert torch.equal(scalar["bf"], torch.tensor([1.5, -2.0], dtype=torch.bfloat16))
    assert torch.equal(scalar["c"], torch.tensor([1 + 2j], dtype=torch.complex128))


def test_writes_take_views_conjugates_and_grad_tensors(new_store):
    td = new_store([3])
    base = torch.arange(12.0).view(4, 3)
    strided = base.view(3, 4)[:, ::2]  # not contiguous
    assert not strided.is_contiguous()
    td["t"] = strided
    assert torch.equal(td["t"], strided)
    c = torch.randn(3, dtype=torch.complex64)
    td["conj"] = c.conj()
    assert torch.equal(td["conj"], c.conj().resolve_conj())
    g = torch.ones(3, requires_grad=True)
    td["g"] = g * 2
    assert torch.equal(td["g"], torch.full((3,), 2.0))


def test_unstorable_values_raise_type_error(new_store):
    td = new_store([2])
    with pytest.raises(TypeError, match="never pickles"):
        td["s"] = object()
    with pytest.raises(TypeError, match="cannot be stored"):
        td["u"] = torch.zeros(2, dtype=torch.uint8).view(torch.bits8)
    assert list(td.keys()) == []


def test_device_is_where_reads_land(new_store):
    td = new_store([2], device="cpu")
    td["a"] = torch.zeros(2)
    assert td.device == torch.device("cpu")
    assert td["a"].device == torch.device("cpu")
    assert td[0].device == torch.device("cpu")
    moved = td.to("cpu")
    assert moved.device == torch.device("cpu")
    plain = TensorDictStore.from_store(td.name, client=td.client)
    assert plain.device is None and plain.to("cpu").device == torch.device("cpu")
    assert plain.to("cpu").name == td.name
    assert isinstance(td.to(TensorDict), TensorDict)
    with pytest.raises(RuntimeError, match="to_local"):
        td.to(torch.float64)


# ---- the TensorDict methods ---------------------------------------------------

def test_keys_items_values_match_tensordict(client):
    local = sample_local()
    td = TensorDictStore.from_tensordict(local, client=client)
    try:
        for nested in (False, True):
            for leaves_only in (False, True):
                want = sorted(map(str, local.keys(nested, leaves_only)))
                assert sorted(map(str, td.keys(nested, leaves_only))) == want
                assert len(td.keys(nested, leaves_only)) == len(want)
                got = dict(td.items(nested, leaves_only))
                assert sorted(map(str, got)) == want
                for k, v in got.items():
                    expected = local.get(k)
                    if isinstance(expected, torch.Tensor):
                        assert torch.equal(v, expected)
                    else:
                        assert isinstance(v, TensorDictStore)
                assert len(list(td.values(nested, leaves_only))) == len(want)
        # tdstored's order: sorted by path; sort=True: tensordict's dotted order.
        assert list(td.keys()) == ["action", "bf", "cplx", "next", "obs"]
        assert list(td.keys(True, True, sort=True)) == list(local.keys(True, True, sort=True))
        # Views list relative keys, through the same code paths.
        assert sorted(map(str, td["next"].keys(True))) == sorted(
            map(str, local["next"].keys(True)))
        assert sorted(map(str, td["next"].keys(True, True))) == sorted(
            map(str, local["next"].keys(True, True)))
    finally:
        td.drop()


def test_contains(new_store):
    td = new_store([2])
    td["a", "b"] = torch.zeros(2)
    assert "a" in td and ("a", "b") in td and ("a",) in td
    assert "b" not in td and ("a", "c") not in td
    assert "a" in td.keys() and ("a", "b") in td.keys(True)
    assert ("a", "b") not in td.keys()  # as tensordict: nested keys need include_nested
    assert "a" not in td.keys(leaves_only=True)
    assert ("a", "b") in td.keys(True, True)
    assert "b" in td["a"]


def test_del_rename_popitem(new_store):
    td = new_store([2])
    td["a"] = torch.zeros(2)
    td["b"] = torch.ones(2)
    td["n", "x"] = torch.arange(2)
    td.del_("a")
    assert "a" not in td
    with pytest.raises(KeyError):
        td.del_("a")
    del td["n"]
    assert list(td.keys()) == ["b"]
    td["n", "x"] = torch.arange(2)
    td.rename_key_("b", "c")
    assert "b" not in td and torch.equal(td["c"], torch.ones(2))
    td.rename_key_("n", ("m", "deep"))
    assert torch.equal(td["m", "deep", "x"], torch.arange(2)) and "n" not in td
    td["d"] = torch.full((2,), 9.0)
    with pytest.raises(KeyError):
        td.rename_key_("c", "d", safe=True)
    assert torch.equal(td["c"], torch.ones(2))  # unchanged by the refused rename
    td.rename_key_("c", "d")  # not safe: overwrites, as tensordict does
    assert torch.equal(td["d"], torch.ones(2)) and "c" not in td
    with pytest.raises(KeyError):
        td.rename_key_("nope", "z")
    key, value = td.popitem()
    assert key == "m" and isinstance(value, TensorDict)
    assert torch.equal(value["deep", "x"], torch.arange(2))
    assert list(td.keys()) == ["d"]
    td.popitem()
    with pytest.raises(KeyError):
        td.popitem()


def test_set_inplace_set_at_update_update_at(new_store):
    td = new_store([3])
    td["f"] = torch.zeros(3, 2)
    td["i"] = torch.zeros(3, dtype=torch.int32)
    td.set_("f", torch.ones(3, 1, dtype=torch.int64))  # cast and broadcast like copy_
    assert td["f"].dtype == torch.float32 and torch.equal(td["f"], torch.ones(3, 2))
    with pytest.raises(KeyError):
        td.set_("missing", torch.zeros(3))
    td.set("i", torch.full((3,), 2.7), inplace=True)  # existing: keeps int32
    assert td["i"].dtype == torch.int32 and td["i"].tolist() == [2, 2, 2]
    td.set("new", torch.ones(3), inplace=True)  # absent: created
    assert "new" in td
    td.set_at_("f", torch.full((2,), 5.0), 1)
    assert td["f"].tolist() == [[1, 1], [5, 5], [1, 1]]
    with pytest.raises(KeyError):
        td.set_at_("missing", torch.zeros(()), 0)
    td.update({"f": torch.zeros(3, 2), "g": {"h": torch.arange(3)}})
    assert torch.equal(td["f"], torch.zeros(3, 2)) and torch.equal(td["g", "h"], torch.arange(3))
    td.update_({"i": torch.full((3,), 7.9)})
    assert td["i"].tolist() == [7, 7, 7] and td["i"].dtype == torch.int32
    with pytest.raises(KeyError):
        td.update_({"zz": torch.zeros(3)})
    td.update_at_({"f": torch.full((2,), 3), "i": torch.tensor(1)}, slice(0, 2))
    assert td["f"].tolist() == [[3, 3], [3, 3], [0, 0]] and td["i"].tolist() == [1, 1, 7]
    with pytest.raises(KeyError):
        td.update_at_({"zz": torch.zeros(())}, 0)
    td.update({"f": torch.ones(3, 2), "i": torch.zeros(3)}, keys_to_update=["f"])
    assert torch.equal(td["f"], torch.ones(3, 2)) and td["i"].tolist() == [1, 1, 7]


def test_fill_zero_empty(new_store):
    td = new_store([4])
    td["a"] = torch.randn(4, 2)
    td["n", "b"] = torch.ones(4, dtype=torch.int64)
    td["n", "c"] = torch.zeros(4, dtype=torch.bool)
    td.fill_("a", 3.0)
    assert torch.equal(td["a"], torch.full((4, 2), 3.0))
    td.fill_("n", 1)
    assert torch.equal(td["n", "b"], torch.ones(4, dtype=torch.int64))
    assert torch.equal(td["n", "c"], torch.ones(4, dtype=torch.bool))
    td.zero_()
    local = td.to_local()
    assert all((v == 0).all() for v in local.values(True, True))
    assert local["n", "c"].dtype == torch.bool
    e = td.empty()
    assert isinstance(e, TensorDict) and e.batch_size == td.batch_size and list(e.keys()) == []
    er = td.empty(recurse=True)
    assert list(er.keys()) == ["n"] and list(er["n"].keys()) == []
    td.masked_fill_(torch.tensor([True, False, False, True]), 5)
    assert td["a"][:, 0].tolist() == [5, 0, 0, 5]
    assert td["n", "b"].tolist() == [5, 0, 0, 5]
    sel = td.masked_select(torch.tensor([True, False, False, True]))
    assert sel.batch_size == torch.Size([2])
    assert td.masked_fill(torch.tensor([True] * 4), 1)["a"].sum() == 8


def test_clone(new_store, client):
    td = new_store([2])
    td["a"] = torch.arange(2)
    td["n", "b"] = torch.ones(2)
    deep = td.clone()
    try:
        assert isinstance(deep, TensorDictStore) and deep.name != td.name
        assert deep.name in client.list()
        assert_td_equal(deep.to_local(), td.to_local())
        deep["a"] = torch.zeros(2, dtype=torch.int64)
        assert torch.equal(td["a"], torch.arange(2))  # independent
        sub = td["n"].clone()  # a view's clone: a new dict of the sub-dict
        assert list(sub.keys()) == ["b"]
        sub.drop()
    finally:
        deep.drop()
    shallow = td.clone(False)
    assert shallow.name == td.name
    shallow["c"] = torch.ones(2)
    assert "c" in td


def test_lock(new_store):
    td = new_store([2])
    td["a"] = torch.zeros(2)
    td["n", "b"] = torch.zeros(2)
    assert not td.is_locked
    td.lock_()
    assert td.is_locked and td["n"].is_locked
    for bad in (lambda: td.__setitem__("x", torch.zeros(2)),
                lambda: td.__setitem__("a", torch.zeros(2)),
                lambda: td.del_("a"),
                lambda: td.rename_key_("a", "z"),
                lambda: td.update({"q": torch.zeros(2)}),
                lambda: td.__setitem__(0, {"newkey": torch.zeros(())}),
                lambda: td["n"].__setitem__("y", torch.zeros(2))):
        with pytest.raises(RuntimeError, match="locked"):
            bad()
    td.set_("a", torch.ones(2))  # in place stays allowed
    td[0] = {"a": torch.tensor(5.0)}
    assert td["a"].tolist() == [5, 1]
    assert list(td.keys(True, True)) == ["a", ("n", "b")]
    td.unlock_()
    td["x"] = torch.zeros(2)
    with td.lock_():
        assert td.is_locked
    assert not td.is_locked


def test_entry_class_batch_size_repr(new_store):
    td = new_store([2, 3])
    td["a"] = torch.zeros(2, 3, 4)
    td["n", "b"] = torch.zeros(2, 3)
    assert td.entry_class("a") is torch.Tensor
    assert td.entry_class("n") is TensorDictStore
    assert td.entry_class(("n", "b")) is torch.Tensor
    assert td.get_item_shape("a") == torch.Size([2, 3, 4])  # from describe, no data
    assert td.get_item_shape("n") == torch.Size([2, 3])
    with pytest.raises(KeyError):
        td.get_item_shape("zz")
    with pytest.raises(KeyError):
        td.entry_class("zz")
    assert td.batch_size == torch.Size([2, 3]) and td.shape == torch.Size([2, 3])
    assert td.numel() == 6 and len(td) == 2
    with pytest.raises(RuntimeError, match="fixed"):
        td.batch_size = [3, 2]
    r = repr(td)
    assert td.name in r and "a: Tensor(shape=[2, 3, 4], dtype=float32)" in r and "n/b" in r


@pytest.mark.parametrize("op", [
    lambda td: td.view(-1), lambda td: td.reshape(-1), lambda td: td.permute(1, 0),
    lambda td: td.transpose(0, 1), lambda td: td.unsqueeze(0), lambda td: td.squeeze(0),
    lambda td: td.expand(4, 2, 3), lambda td: td.flatten(0, 1), lambda td: td.unflatten(0, (1, 2)),
    lambda td: td.repeat(2, 1),
], ids=["view", "reshape", "permute", "transpose", "unsqueeze", "squeeze", "expand",
        "flatten", "unflatten", "repeat"])
def test_shape_ops_raise_naming_to_local(new_store, op):
    td = new_store([2, 3])
    td["a"] = torch.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"to_local\(\)"):
        op(td)


def test_unsupported_methods_say_what_to_do(new_store):
    td = new_store([2])
    td["a"] = torch.zeros(2)
    with pytest.raises(NotImplementedError, match="handle"):
        td.share_memory_()
    with pytest.raises(RuntimeError, match="to_local"):
        td.pin_memory()
    with pytest.raises(RuntimeError, match="memmap"):
        td.memmap_()


def test_methods_served_from_a_local_copy(new_store):
    td = new_store([4])
    td["a"] = torch.arange(4.0)
    assert (td.apply(lambda x: x + 1)["a"] == torch.arange(4.0) + 1).all()
    td.apply_(lambda x: x * 2)
    assert td["a"].tolist() == [0, 2, 4, 6]
    assert [p.batch_size[0] for p in td.split(3)] == [3, 1]
    assert [p.batch_size[0] for p in td.chunk(2)] == [2, 2]
    rows = list(td.unbind(0))
    assert len(rows) == 4 and rows[3]["a"].item() == 6
    assert (td == td.to_local()).all()
    assert td.select("a")["a"].tolist() == [0, 2, 4, 6]
    assert list(td.exclude("a").keys()) == []
    assert td.flatten_keys()["a"].shape == torch.Size([4])


def test_inplace_pointwise_ops_reach_the_store(new_store):
    # tensordict's add_/mul_/clamp_min_... mutate leaf memory; on a store they
    # must write back, not silently change a copy.
    td = new_store([3])
    td["a"] = torch.tensor([1.0, -2.0, 3.0])
    td["n", "b"] = torch.tensor([4, 5, 6])
    local = td.to_local()
    td.add_(1)
    local.add_(1)
    td.mul_(2)
    local.mul_(2)
    td.clamp_min_(0)
    local.clamp_min_(0)
    td["n"].sub_(1)
    local["n"].sub_(1)
    assert_td_equal(td.to_local(), local)
    td.copy_at_(TensorDict({"a": torch.tensor(9.0), "n": {"b": torch.tensor(0)}}, []), 1)
    local[1] = TensorDict({"a": torch.tensor(9.0), "n": {"b": torch.tensor(0)}}, [])
    assert_td_equal(td.to_local(), local)
    td.copy_(TensorDict({"a": torch.zeros(3), "n": {"b": torch.ones(3, dtype=torch.int64)}}, [3]))
    assert td["a"].tolist() == [0, 0, 0] and td["n", "b"].tolist() == [1, 1, 1]
    with pytest.raises(RuntimeError, match="requires_grad_"):
        td.requires_grad_()


def test_close_and_drop(client, new_store):
    td = new_store([2])
    td["a"] = torch.zeros(2)
    other = TensorDictStore.from_store(td.handle)
    other.close()
    with pytest.raises(RuntimeError, match="closed"):
        other["a"]
    assert torch.equal(td["a"], torch.zeros(2))  # the dict stays
    td.clear_redis()
    assert td.name not in client.list()
    with pytest.raises(KeyError):
        TensorDictStore.from_store(td.handle)

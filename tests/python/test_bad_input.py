"""Bad input raises what a tensordict user expects and leaves the store unchanged."""

import pytest
import torch
from tensordict import TensorDict
from tensordict.tensorclass import NonTensorData

import tdstore
from tdstore import TensorDictStore
from _helpers import assert_td_equal


@pytest.fixture
def filled(new_store):
    td = new_store([5])
    td["a"] = torch.arange(10.0).view(5, 2)
    td["i"] = torch.arange(5, dtype=torch.int32)
    td["n", "b"] = torch.ones(5, dtype=torch.bfloat16)
    return td


CASES = {
    # name: (operation, expected exception class)
    "whole leaf of wrong batch": (lambda td: td.__setitem__("a", torch.zeros(4, 2)), RuntimeError),
    "update with one leaf of wrong batch": (
        lambda td: td.update({"a": torch.zeros(5, 2), "new": torch.zeros(3)}), RuntimeError),
    "update with a value JSON cannot hold": (
        lambda td: td.update({"a": torch.zeros(5, 2), "s": {1, 2}}), TypeError),
    "update with an object in a NonTensorData": (
        lambda td: td.update(TensorDict({"a": torch.zeros(5, 2), "s": NonTensorData(object())},
                                        [])),
        TypeError),
    "unstorable dtype": (lambda td: td.__setitem__("u", torch.zeros(5, dtype=torch.uint8).view(torch.bits8)),
                         TypeError),
    "indexed value does not broadcast": (
        lambda td: td.__setitem__(slice(0, 2), {"i": torch.ones(2), "a": torch.ones(2, 3)}),
        tdstore.InvalidArgumentError),
    "indexed value does not broadcast (RuntimeError)": (
        lambda td: td.__setitem__(slice(0, 2), {"a": torch.ones(3, 2)}), RuntimeError),
    "indexed write out of range": (
        lambda td: td.__setitem__(torch.tensor([1, 5]), {"i": torch.ones(2)}), IndexError),
    "indexed write negative out of range": (
        lambda td: td.__setitem__(-6, {"i": torch.tensor(1)}), IndexError),
    "indexed read out of range": (lambda td: td[[0, 99]], IndexError),
    "int read out of range": (lambda td: td[5], IndexError),
    "mask of wrong length": (lambda td: td[torch.tensor([True, False])], IndexError),
    "mask write of wrong length": (
        lambda td: td.__setitem__(torch.tensor([True, False]), {"i": torch.tensor(3)}),
        IndexError),
    "negative step": (lambda td: td[::-1], ValueError),
    "float index tensor": (lambda td: td[torch.tensor([0.0, 1.0])], IndexError),
    "too many indices": (lambda td: td[0, 0], IndexError),
    "leaf under a leaf": (lambda td: td.__setitem__(("a", "b"), torch.zeros(5)), RuntimeError),
    "sub-dict onto a leaf": (
        lambda td: td.__setitem__("i", TensorDict({"x": torch.zeros(5)}, [5])), RuntimeError),
    "leaf and its own sub-leaf in one update": (
        lambda td: td.update({"x": torch.zeros(5), ("x", "y"): torch.zeros(5)}),
        (ValueError, RuntimeError)),
    "empty key": (lambda td: td.__setitem__("", torch.zeros(5)), ValueError),
    "set_ of a missing key": (lambda td: td.set_("missing", torch.zeros(5)), KeyError),
    "set_at_ of a missing key": (lambda td: td.set_at_("missing", torch.zeros(()), 0), KeyError),
    "update_ with a missing key": (
        lambda td: td.update_({"a": torch.zeros(5, 2), "missing": torch.zeros(5)}), KeyError),
    "update_at_ that does not broadcast": (
        lambda td: td.update_at_({"i": torch.zeros(2), "a": torch.zeros(3, 3)}, slice(0, 2)),
        RuntimeError),
    "del_ of a missing key": (lambda td: td.del_("missing"), KeyError),
    "rename_key_ of a missing key": (lambda td: td.rename_key_("missing", "z"), KeyError),
    "rename_key_ safe onto an existing key": (
        lambda td: td.rename_key_("a", "i", safe=True), KeyError),
    "get of a missing key": (lambda td: td["missing"], KeyError),
    "get of a missing nested key": (lambda td: td["n", "missing"], KeyError),
    "fill_ of a missing key": (lambda td: td.fill_("missing", 1), KeyError),
    "shape op": (lambda td: td.reshape(-1), RuntimeError),
    "batch size change": (lambda td: setattr(td, "batch_size", [6]), RuntimeError),
    "None in an indexed write": (
        lambda td: td.__setitem__((None, 0), {"i": torch.tensor(1)}), IndexError),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_raises_and_changes_nothing(filled, case):
    operation, expected = CASES[case]
    before = filled.to_local()
    keys_before = list(filled.keys(True))
    with pytest.raises(expected):
        operation(filled)
    assert list(filled.keys(True)) == keys_before
    assert_td_equal(filled.to_local(), before)
    assert filled.batch_size == torch.Size([5])


def test_rejected_upload_creates_no_dict(client):
    names = client.list()
    with pytest.raises(TypeError):
        TensorDictStore.from_dict({"a": torch.zeros(2), "s": NonTensorData(object())},
                                  batch_size=[2], client=client)
    with pytest.raises(TypeError):
        TensorDictStore.from_tensordict(
            TensorDict({"a": torch.zeros(2, dtype=torch.uint8).view(torch.bits8)}, [2]), client=client)
    assert client.list() == names


def test_bad_dict_name_is_value_error(client):
    with pytest.raises(ValueError):
        TensorDictStore(batch_size=[2], client=client, name="/starts-with-a-slash")
    with pytest.raises(ValueError):
        TensorDictStore(batch_size=[2], client=client, name="x" * 200)


def test_upload_refused_by_the_server_drops_its_dict(client):
    names = client.list()
    # Python does not check this one: a path component over 256 bytes.
    with pytest.raises(ValueError):
        TensorDictStore.from_dict({"ok": torch.zeros(2), "k" * 300: torch.zeros(2)},
                                  batch_size=[2], client=client)
    assert client.list() == names

"""TensorDictStore.appender(): row writes over one stream, against a local TensorDict."""

import pytest
import torch
from tensordict import TensorDict

import tdstore
from tdstore import TensorDictStore


def _schema(n):
    return TensorDict({"obs": torch.zeros(n, 4), "action": torch.zeros(n, 2, dtype=torch.int64),
                       "next": {"reward": torch.zeros(n)}}, batch_size=[n])


def test_rows_one_at_a_time_equal_a_local_tensordict(new_store):
    n = 50
    store = new_store([n])
    store.update(_schema(n))
    local = _schema(n)
    gen = torch.Generator().manual_seed(7)
    order = list(range(30, n)) + list(range(0, 10))  # a ring buffer's cursor wrapping
    with store.appender(batch_rows=8, window=2) as out:
        for i in order:
            row = TensorDict({"obs": torch.randn(4, generator=gen),
                              "action": torch.randint(0, 9, (2,), generator=gen),
                              "next": {"reward": torch.randn((), generator=gen)}}, [])
            out[i] = row
            local[i] = row
    assert out.rows_written == len(order)
    assert (store.to_local() == local).all()


def test_append_of_several_rows_and_a_subset_of_keys(new_store):
    store = new_store([20])
    store.update(_schema(20))
    out = store.appender(["obs", ("next", "reward")])
    out.append(5, {"obs": torch.ones(3, 4), ("next", "reward"): torch.full((3,), 2.0)})
    out[8:10] = {"obs": torch.full((2, 4), 3.0), ("next", "reward"): torch.full((2,), 4.0)}
    out.flush()
    assert torch.equal(store["obs"][5:8], torch.ones(3, 4))
    assert torch.equal(store["obs"][8:10], torch.full((2, 4), 3.0))
    assert torch.equal(store["next", "reward"][5:10], torch.tensor([2.0, 2, 2, 4, 4]))
    assert torch.equal(store["obs"][:5], torch.zeros(5, 4))
    assert torch.equal(store["action"], torch.zeros(20, 2, dtype=torch.int64))


def test_a_refused_batch_is_raised_once_and_writes_nothing(new_store):
    store = new_store([10])
    store["x"] = torch.zeros(10)
    out = store.appender(["x"], batch_rows=4)
    out.append(0, {"x": torch.ones(4)})
    out.append(8, {"x": torch.ones(4)})  # rows 8..11: past the end
    out.append(4, {"x": torch.full((2,), 5.0)})
    with pytest.raises(IndexError, match=r"\[8, 12\)"):
        out.flush()
    out.flush()  # reported once
    assert torch.equal(store["x"], torch.tensor([1.0, 1, 1, 1, 5, 5, 0, 0, 0, 0]))
    assert out.rows_written == 6


def test_bad_rows_are_refused_before_anything_is_sent(new_store):
    store = new_store([10])
    store["x"] = torch.zeros(10, 3)
    with pytest.raises(KeyError):
        store.appender(["nope"])
    out = store.appender(["x"])
    with pytest.raises(ValueError, match="do not fit"):
        out.append(0, {"x": torch.ones(2, 4)})
    with pytest.raises(TypeError):
        out.append(0, {"x": [1, 2, 3]})
    out.flush()
    assert out.rows_written == 0
    assert torch.equal(store["x"], torch.zeros(10, 3))


def test_values_are_cast_to_the_leaf_dtype_and_locked_stores_accept_appends(new_store):
    store = new_store([4])
    store["x"] = torch.zeros(4, dtype=torch.int32)
    store.lock_()
    with store.appender(["x"]) as out:
        out.append(1, {"x": torch.tensor([2.0, 3.0])})
    assert torch.equal(store["x"], torch.tensor([0, 2, 3, 0], dtype=torch.int32))


def test_an_appender_never_writes_the_namesake_that_replaced_its_dict(client):
    name = f"py-append-namesake-{id(client)}"
    old = TensorDictStore(batch_size=[4], client=client, name=name)
    old["x"] = torch.zeros(4)
    out = old.appender()
    client.drop(name)
    now = TensorDictStore(batch_size=[4], client=client, name=name)
    now["x"] = torch.zeros(4)
    out[0] = {"x": torch.tensor(1.0)}
    with pytest.raises(KeyError):
        out.flush()
    assert torch.equal(now["x"], torch.zeros(4))
    now.drop()

"""tdstore.torchrl against torchrl's own classes: a ReplayBuffer on
TdStoreStorage holds exactly what one on LazyTensorStorage holds after the
same extends (wrap-around included); samplers and TensorDictReplayBuffer
work on it; collectors in two processes extend one buffer through
TdStoreWriter and every row lands once, with one length for everybody;
state_dict, dumps/loads and pickling reopen the same dict; bad input is
refused with nothing written."""

import multiprocessing as mp
import pickle
import uuid

import pytest
import torch
from tensordict import TensorDict, tensorclass
from torchrl.data import (LazyTensorStorage, ReplayBuffer, SliceSampler,
                          TensorDictReplayBuffer)

import tdstore
from tdstore import TensorDictStore
from tdstore.torchrl import TdStoreStorage, TdStoreWriter


def batch(start: int, n: int) -> TensorDict:
    ids = torch.arange(start, start + n)
    return TensorDict({"id": ids, "obs": ids[:, None].float().expand(n, 4).clone(),
                       "next": {"done": ids % 3 == 0}}, [n])


def rows_of(storage, n):
    return storage.get(torch.arange(n))


@pytest.mark.parametrize("writer", ["default", "tdstore"])
def test_a_buffer_holds_what_lazy_tensor_storage_holds(addr, writer):
    g = torch.Generator().manual_seed(0)
    storage = TdStoreStorage(50, addr=addr)
    ours = ReplayBuffer(storage=storage, batch_size=8,
                        writer=TdStoreWriter() if writer == "tdstore" else None)
    theirs = ReplayBuffer(storage=LazyTensorStorage(50), batch_size=8)
    try:
        start = 0
        for _ in range(9):  # 9 extends of 1..15 rows: wraps around past 50
            n = int(torch.randint(1, 16, (), generator=g))
            a = ours.extend(batch(start, n))
            b = theirs.extend(batch(start, n))
            assert torch.equal(torch.as_tensor(a), torch.as_tensor(b))
            start += n
            assert len(ours) == len(theirs)
            # The last cursor torchrl's samplers cut at the ring's seam with.
            assert storage._last_cursor_index == theirs.storage._last_cursor_index
        got, want = rows_of(storage, len(theirs)), rows_of(theirs.storage, len(theirs))
        for key in want.keys(True, True):
            assert torch.equal(got[key], want[key]), key
        sample = ours.sample()
        assert sample.batch_size == torch.Size([8])
        # Every sampled row is a row of the buffer, whole.
        assert torch.equal(sample["obs"][:, 0].long(), sample["id"])
        assert set(sample["id"].tolist()) <= set(want["id"].tolist())
        one = ours.add(batch(start, 1)[0])
        assert int(storage.get(one)["id"]) == start
        assert storage._last_cursor_index == one
    finally:
        storage.store.drop()


def test_slice_sampling_and_tensordict_buffers(addr):
    """torchrl's SliceSampler on a TensorDictReplayBuffer: each slice is
    consecutive steps of one episode. (PrioritizedSampler needs torchrl's C++
    extension, which the pinned torchrl 0.14.1 wheel cannot load beside torch
    2.13: an undefined torch symbol. It is not tested here.)"""
    storage = TdStoreStorage(64, addr=addr)
    rb = TensorDictReplayBuffer(storage=storage, batch_size=16,
                                sampler=SliceSampler(num_slices=4, traj_key="episode"))
    try:
        data = batch(0, 48)
        data["episode"] = torch.arange(48) // 12  # 4 episodes of 12 steps
        rb.extend(data)
        sample = rb.sample()
        assert sample.batch_size == torch.Size([16])
        assert torch.equal(sample["obs"][:, 0].long(), sample["id"])
        for piece in sample.reshape(4, 4).unbind(0):
            ids = piece["id"]
            assert torch.equal(ids, torch.arange(int(ids[0]), int(ids[0]) + 4))
            assert len(set(piece["episode"].tolist())) == 1
    finally:
        storage.store.drop()


@tensorclass
class Step:
    obs: torch.Tensor
    reward: torch.Tensor


@pytest.mark.parametrize("writer", ["default", "tdstore"])
def test_tensors_and_tensorclasses_come_back_as_stored_in_every_process(addr, writer):
    """What LazyTensorStorage gives back, TdStoreStorage gives back: plain
    tensors as tensors, a tensorclass as that tensorclass, a TensorDict as a
    TensorDict; also through another storage object on the same dict (as
    another process opens it) and in a spawned process."""
    made = {"tensor": torch.arange(12.0).reshape(6, 2),
            "tensorclass": Step(obs=torch.arange(12.0).reshape(6, 2), reward=torch.arange(6.0),
                                batch_size=[6]),
            "tensordict": batch(0, 6)}
    for kind, data in made.items():
        local = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
        storage = TdStoreStorage(10, addr=addr)
        rb = ReplayBuffer(storage=storage, batch_size=4,
                          **({"writer": TdStoreWriter()} if writer == "tdstore" else {}))
        try:
            local.extend(data)
            rb.extend(data)
            assert len(rb) == 6
            index = torch.tensor([0, 5, 3])
            want = local.storage.get(index)
            for got in (storage.get(index),
                        TdStoreStorage(10, name=storage.name, addr=addr).get(index)):
                assert type(got) is type(want), kind
                if kind == "tensor":
                    assert torch.equal(got, want)
                else:
                    assert (got == want).all(), kind
            assert type(rb.sample()) is type(local.sample()), kind
            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            child = ctx.Process(target=_type_of_rows, args=(storage.name, addr, queue))
            child.start()
            assert queue.get(timeout=120) == type(want).__name__, kind
            child.join(60)
        finally:
            storage.store.drop()


def _type_of_rows(name, addr, queue):
    # Step's module (this test file) is imported here by unpickling the
    # target, so the tensorclass is found; nothing is imported by name.
    queue.put(type(TdStoreStorage(10, name=name, addr=addr).get(torch.tensor([1]))).__name__)


def _collector(name, addr, start, n, chunk):
    rb = ReplayBuffer(storage=TdStoreStorage(1000, name=name, addr=addr), writer=TdStoreWriter())
    for s in range(start, start + n, chunk):
        rb.extend(batch(s, min(chunk, start + n - s)))


def test_two_collector_processes_and_a_learner_share_one_buffer(addr):
    name = f"rb-test-{uuid.uuid4().hex}"
    learner = ReplayBuffer(storage=TdStoreStorage(1000, name=name, addr=addr), batch_size=32)
    assert len(learner) == 0
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_collector, args=(name, addr, k * 10_000, 300, 7))
             for k in range(2)]
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            assert p.exitcode == 0
        # One length for every process; every row landed once, none lost
        # to the other collector.
        assert len(learner) == 600
        rows = learner.storage.get(torch.arange(600))
        assert sorted(rows["id"].tolist()) == sorted(list(range(300)) +
                                                     list(range(10_000, 10_300)))
        assert torch.equal(rows["obs"][:, 0].long(), rows["id"])
        assert learner.sample().batch_size == torch.Size([32])
    finally:
        TensorDictStore.from_store(name, addr=addr).drop()


def test_state_dict_dumps_and_pickling_reopen_the_same_dict(addr, tmp_path):
    storage = TdStoreStorage(20, addr=addr, length_ttl=0)
    rb = ReplayBuffer(storage=storage, batch_size=4, writer=TdStoreWriter())
    try:
        rb.extend(batch(0, 12))
        other = TdStoreStorage(20, addr=addr, length_ttl=0)  # sees every change at once
        other.load_state_dict(storage.state_dict())
        assert other.name == storage.name and len(other) == 12
        assert torch.equal(other.get(torch.arange(12))["id"], torch.arange(12))
        rb.dumps(tmp_path)
        fresh = ReplayBuffer(storage=TdStoreStorage(20, addr=addr), batch_size=4,
                             writer=TdStoreWriter())
        fresh.loads(tmp_path)
        assert len(fresh) == 12 and fresh.storage.name == storage.name
        clone = pickle.loads(pickle.dumps(storage))
        assert len(clone) == 12
        # A writer after the reopen continues at the shared cursor. A storage
        # that keeps its length a minute sees it after that minute only.
        patient = TdStoreStorage(20, name=storage.name, addr=addr, length_ttl=60)
        assert len(patient) == 12
        fresh.extend(batch(12, 3))
        assert len(storage) == 15 and len(patient) == 12
        assert storage.get(14)["id"] == 14
        rb.empty()
        assert len(storage) == 0 and len(other) == 0
    finally:
        storage.store.drop()


def test_bad_input_is_refused_and_nothing_written(addr):
    storage = TdStoreStorage(8, addr=addr)
    rb = ReplayBuffer(storage=storage)
    with pytest.raises(TypeError, match="cannot store"):
        rb.extend({"obs": torch.ones(2)} and "not rows")
    assert storage.store is None  # nothing was created
    with pytest.raises(TypeError):
        ReplayBuffer(storage=LazyTensorStorage(8), writer=TdStoreWriter())
    rb.extend(batch(0, 4))
    try:
        # A dict of another batch size under the same name is refused.
        with pytest.raises(ValueError, match="max_size"):
            len(TdStoreStorage(9, name=storage.name, addr=addr))
        assert len(storage) == 4
    finally:
        storage.store.drop()


@pytest.mark.parametrize("writer", ["default", "tdstore"])
@pytest.mark.parametrize("layout", ["record", "leaves"])
def test_rows_keep_their_batch_dims_as_in_lazy_tensor_storage(addr, writer, layout):
    """Rows whose batch has more dims than the storage's come back with all
    of them, through get, sample and rb[:], as LazyTensorStorage gives them:
    random row shapes, TensorDicts and tensorclasses, the same extends on
    both."""
    import random

    rng = random.Random(hash((writer, layout)) % 1000)
    for row_batch in ([rng.randint(1, 4)], [rng.randint(1, 3), rng.randint(1, 3)]):
        storage = TdStoreStorage(30, addr=addr, layout=layout)
        ours = ReplayBuffer(storage=storage, batch_size=5,
                            writer=TdStoreWriter() if writer == "tdstore" else None)
        theirs = ReplayBuffer(storage=LazyTensorStorage(30), batch_size=5)
        try:
            start = 0
            for _ in range(5):  # past 30 rows: wraps around
                n = rng.randint(1, 9)
                ids = torch.arange(start, start + n).reshape(n, *[1] * len(row_batch))
                rows = TensorDict({"id": ids.expand(n, *row_batch).clone(),
                                   "obs": torch.randn(n, *row_batch, 3)}, [n, *row_batch])
                ours.extend(rows)
                theirs.extend(rows)
                start += n
            assert len(ours) == len(theirs)
            n = len(theirs)
            for index in (torch.arange(n), [1], 2, slice(1, 4), torch.tensor([n - 1, 0])):
                got, want = storage.get(index), theirs.storage.get(index)
                assert got.batch_size == want.batch_size, (index, got.batch_size)
                for key in ("id", "obs"):
                    assert torch.equal(got[key], want[key]), (index, key)
            assert ours[:].batch_size == theirs[:].batch_size
            sample = ours.sample()
            assert sample.batch_size == theirs.sample().batch_size == torch.Size([5, *row_batch])
            # Every sampled row is a row of the buffer, whole.
            assert torch.equal(sample["id"], sample["id"][(slice(None),) + (0,) * len(row_batch)]
                               .reshape(5, *[1] * len(row_batch)).expand_as(sample["id"]))
            # Rows of another batch shape are refused, as LazyTensorStorage
            # refuses them, with nothing written.
            before = len(ours)
            other = TensorDict({"id": torch.zeros(2, 7, dtype=torch.long),
                                "obs": torch.zeros(2, 7, 3)}, [2, 7])
            with pytest.raises(RuntimeError):
                theirs.extend(other)
            with pytest.raises(RuntimeError):
                ours.extend(other)
            assert len(ours) == before
        finally:
            if storage.store is not None:
                storage.store.drop()


@tensorclass
class _Step:
    obs: torch.Tensor


def test_tensorclass_rows_keep_their_batch_dims(addr):
    storage = TdStoreStorage(10, addr=addr)
    ours, theirs = ReplayBuffer(storage=storage), ReplayBuffer(storage=LazyTensorStorage(10))
    try:
        rows = _Step(obs=torch.randn(4, 2, 3), batch_size=[4, 2])
        ours.extend(rows)
        theirs.extend(rows)
        got, want = storage.get([1, 3]), theirs.storage.get([1, 3])
        assert type(got) is type(want) is _Step
        assert got.batch_size == want.batch_size == torch.Size([2, 2])
        assert torch.equal(got.obs, want.obs)
    finally:
        storage.store.drop()


def test_torchrls_storage_keywords_mean_what_they_mean_there(addr):
    names = set(tdstore.Client(addr).list())
    # Accepted, each with torchrl's meaning (docs/python.md).
    storage = TdStoreStorage(8, addr=addr, device="auto", compilable=False, consolidated=True,
                             shared_init=True, cleanup_memmap=False, existsok=True,
                             checkpointer=None)
    assert storage.shared_init and storage.consolidated and not storage._compilable
    # Refused at construction, naming the keyword; nothing is created.
    with pytest.raises(NotImplementedError, match="ndim=2"):
        TdStoreStorage(8, addr=addr, ndim=2)
    with pytest.raises(TypeError, match="no_such_keyword"):
        TdStoreStorage(8, addr=addr, no_such_keyword=True)
    assert set(tdstore.Client(addr).list()) == names
    # existsok=False: a buffer whose dict exists already is refused.
    rb = ReplayBuffer(storage=storage)
    rb.extend(batch(0, 3))
    try:
        again = ReplayBuffer(storage=TdStoreStorage(8, name=storage.name, addr=addr,
                                                    existsok=False))
        with pytest.raises(ValueError, match="existsok=False"):
            again.extend(batch(3, 2))
        assert len(rb) == 3
    finally:
        storage.store.drop()

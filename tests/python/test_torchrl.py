"""tdstore.torchrl against torchrl's own classes: a ReplayBuffer on
TdStoreStorage holds exactly what one on LazyTensorStorage holds after the
same extends (wrap-around included); samplers and TensorDictReplayBuffer
work on it; collectors in two processes extend one buffer through
TdStoreWriter and every row lands once, with one length for everybody;
state_dict, dumps/loads and pickling reopen the same dict; bad input is
refused with nothing written."""

import pickle
import uuid

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict, tensorclass
from torchrl.data import (LazyTensorStorage, ReplayBuffer, SliceSampler,
                          TensorDictReplayBuffer)

import tdstore
from tdstore import TensorDictStore
from tdstore.torchrl import TdStoreStorage, TdStoreWriter
from _helpers import worker_context


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
            ctx = worker_context()
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


def _run_in_processes(target, args_each):
    """Runs ``target(*args)`` for each of ``args_each`` in worker processes (worker_context)
    at once, and waits for all: each must exit 0."""
    ctx = worker_context()
    procs = [ctx.Process(target=target, args=args) for args in args_each]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0


def test_two_collector_processes_and_a_learner_share_one_buffer(addr):
    name = f"rb-test-{uuid.uuid4().hex}"
    learner = ReplayBuffer(storage=TdStoreStorage(1000, name=name, addr=addr), batch_size=32)
    assert len(learner) == 0
    try:
        _run_in_processes(_collector, [(name, addr, k * 10_000, 300, 7) for k in range(2)])
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
    with pytest.raises(ValueError, match="ndim=0"):
        TdStoreStorage(8, addr=addr, ndim=0)
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


def _steps(collector: int, start: int, n: int, envs: int = 3, episode_len: int = 7):
    """Steps start .. start + n - 1 of ``envs`` environments of one collector,
    batch [envs, n] as a parallel collector produces them; each environment's
    episodes are ``episode_len`` steps long, with ids unique across
    collectors and environments."""
    step = torch.arange(start, start + n).expand(envs, n)
    env = torch.arange(envs)[:, None].expand(envs, n)
    episode = collector * 1_000_000 + env * 10_000 + step // episode_len
    return TensorDict({"step": step.clone(), "episode": episode,
                       "obs": step[..., None].float().expand(envs, n, 2).clone(),
                       "next": {"done": (step % episode_len == episode_len - 1)[..., None]}},
                      [envs, n])


@pytest.mark.parametrize("sampler", ["slice", "slice_without_replacement"])
def test_slice_samplers_on_a_two_dim_buffer_sample_what_they_sample_on_lazy_tensor_storage(
        addr, sampler):
    """ndim=2: the same extends into TdStoreStorage and LazyTensorStorage, then
    SliceSampler / SliceSamplerWithoutReplacement with generators seeded
    alike draw the same slices, wrap-around included."""
    from torchrl.data import SliceSamplerWithoutReplacement

    make = {"slice": lambda: SliceSampler(num_slices=4, traj_key="episode"),
            "slice_without_replacement": lambda: SliceSamplerWithoutReplacement(
                num_slices=4, traj_key="episode")}[sampler]
    storage = TdStoreStorage(90, addr=addr, ndim=2)
    ours = TensorDictReplayBuffer(storage=storage, sampler=make(), batch_size=16,
                                  generator=torch.Generator().manual_seed(3))
    theirs = TensorDictReplayBuffer(storage=LazyTensorStorage(90, ndim=2), sampler=make(),
                                    batch_size=16, generator=torch.Generator().manual_seed(3))
    try:
        start = 0
        for n in (8, 11, 9, 6, 12):  # 46 steps of 3 envs in 30 rows: wraps around
            a, b = ours.extend(_steps(0, start, n)), theirs.extend(_steps(0, start, n))
            assert torch.equal(a, b)
            start += n
            assert storage.shape == theirs.storage.shape and len(ours) == len(theirs)
            for _ in range(3):
                try:
                    want = theirs.sample()
                except RuntimeError:  # ran out (without replacement): both do
                    with pytest.raises(RuntimeError):
                        ours.sample()
                    continue
                got = ours.sample()
                assert got.batch_size == want.batch_size  # fewer once run out (without replacement)
                for key in ("step", "episode", "obs", ("next", "done"), "index"):
                    assert torch.equal(got[key], want[key]), key
    finally:
        storage.store.drop()


def _collector_2d(name, addr, collector, steps, chunk):
    rb = ReplayBuffer(storage=TdStoreStorage(3000, name=name, addr=addr, ndim=2),
                      writer=TdStoreWriter())
    for s in range(0, steps, chunk):
        rb.extend(_steps(collector, s, chunk))


def test_two_collector_processes_extend_one_two_dim_buffer_a_learner_slices(addr):
    """Two collectors (processes) extend one ndim=2 buffer of [time, env]
    rows; the learner's SliceSampler cuts slices of consecutive steps of one
    episode of one environment of one collector, every time."""
    name = f"rb-test-{uuid.uuid4().hex}"
    try:
        _run_in_processes(_collector_2d, [(name, addr, k, 200, 10) for k in (1, 2)])
        learner = TensorDictReplayBuffer(
            storage=TdStoreStorage(3000, name=name, addr=addr, ndim=2),
            sampler=SliceSampler(num_slices=8, traj_key="episode"), batch_size=40)
        assert len(learner) == 2 * 200 * 3 and learner.storage.shape == torch.Size([400, 3])
        rows = learner.storage.get(slice(None))
        # Every step of every collector landed once.
        for k in (1, 2):
            mine = rows["episode"] // 1_000_000 == k
            assert sorted(rows["step"][mine].tolist()) == sorted(list(range(200)) * 3)
        for _ in range(20):
            sample = learner.sample()
            for piece in sample.reshape(8, 5).unbind(0):
                assert len(set(piece["episode"].tolist())) == 1
                steps = piece["step"]
                assert torch.equal(steps, torch.arange(int(steps[0]), int(steps[0]) + 5))
                assert torch.equal(piece["obs"][:, 0].long(), steps)
    finally:
        TensorDictStore.from_store(name, addr=addr).drop()


def test_writer_state_is_the_dicts_in_every_process(addr, tmp_path):
    """TdStoreWriter's _cursor, _write_count and state_dict are the dict's:
    after two collector processes extended one buffer, a third writer reads
    the totals; setting them (load_state_dict, loads) sets them for every
    writer; empty() keeps or zeroes the write count as torchrl's does."""
    name = f"rb-test-{uuid.uuid4().hex}"
    try:
        _run_in_processes(_collector, [(name, addr, k * 10_000, 600, 7) for k in range(2)])
        rb = ReplayBuffer(storage=TdStoreStorage(1000, name=name, addr=addr),
                          writer=TdStoreWriter())
        writer = rb.writer
        assert writer._write_count == 1200 and writer._cursor == 1200 % 1000
        assert writer.state_dict() == {"_cursor": 200, "_write_count": 1200}
        assert len(rb) == 1000 and rb.storage._is_full
        # Another writer (another process would be the same) sees what this
        # one does.
        other = ReplayBuffer(storage=TdStoreStorage(1000, name=name, addr=addr),
                             writer=TdStoreWriter())
        index = rb.extend(batch(0, 5))
        assert torch.equal(index, torch.arange(200, 205))
        assert other.writer.state_dict() == {"_cursor": 205, "_write_count": 1205}
        other.writer.load_state_dict({"_cursor": 990, "_write_count": 7})
        assert writer._cursor == 990 and writer._write_count == 7
        assert torch.equal(rb.extend(batch(0, 20)), torch.arange(990, 1010) % 1000)
        assert writer.state_dict() == {"_cursor": 10, "_write_count": 27}
        rb.dumps(tmp_path)
        clone = pickle.loads(pickle.dumps(writer))
        assert clone.state_dict() == writer.state_dict()
        # empty(): the length and cursor go to 0; the write count as asked.
        rb.empty(empty_write_count=False)
        assert len(rb) == 0 and writer.state_dict() == {"_cursor": 0, "_write_count": 27}
        rb.extend(batch(0, 3))
        assert writer.state_dict() == {"_cursor": 3, "_write_count": 30}
        rb.empty()
        assert writer.state_dict() == {"_cursor": 0, "_write_count": 0}
        rb.loads(tmp_path)  # the writer's state as dumped
        assert writer.state_dict() == {"_cursor": 10, "_write_count": 27}
    finally:
        TensorDictStore.from_store(name, addr=addr).drop()


def _cells(td):
    """Every batch cell's TensorDict of ``td`` (a lazy stack whose entries may
    differ in shape), C order."""
    if td.batch_dims == 0:
        return [td]
    return [cell for row in td.unbind(0) for cell in _cells(row)]


@pytest.mark.parametrize("writer", ["default", "tdstore"])
def test_lazy_stacks_along_dim_1_are_kept_as_lazy_tensor_storage_keeps_them(addr, writer):
    """Rows that are lazy stacks along dim 1 whose entries differ in shape (a
    key of [4, 8] in one element, [3, 8] in the other): every cell comes back
    as LazyTensorStorage gives it, through get and sample."""
    g = torch.Generator().manual_seed(2)
    storage = TdStoreStorage(6, addr=addr)
    ours = ReplayBuffer(storage=storage, batch_size=3, generator=torch.Generator().manual_seed(1),
                        **({"writer": TdStoreWriter()} if writer == "tdstore" else {}))
    theirs = ReplayBuffer(storage=LazyTensorStorage(6), batch_size=3,
                          generator=torch.Generator().manual_seed(1))
    try:
        for n in (5, 4):  # 9 rows into 6: wraps around
            rows = LazyStackedTensorDict(
                TensorDict(a=torch.randn(n, 4, 8, generator=g), b=torch.randn(n, generator=g),
                           batch_size=[n]),
                TensorDict(a=torch.randn(n, 3, 8, generator=g), b=torch.randn(n, generator=g),
                           batch_size=[n]), stack_dim=1)
            ours.extend(rows)
            theirs.extend(rows)
            assert len(ours) == len(theirs)
        for got, want in ((storage.get(torch.tensor([4, 0, 2])),
                           theirs.storage.get(torch.tensor([4, 0, 2]))),
                          (ours.sample(), theirs.sample())):
            assert got.batch_size == want.batch_size
            for a, b in zip(_cells(got), _cells(want)):
                assert torch.equal(a["a"], b["a"]) and torch.equal(a["b"], b["b"])
    finally:
        storage.store.drop()


@pytest.mark.parametrize("rows", ["tensordict", "tensor"])
def test_a_lazy_tensor_storage_state_dict_loads_into_tdstore(addr, rows):
    """A buffer checkpointed on LazyTensorStorage (its state_dict holds the
    rows) loads into a buffer on TdStoreStorage: the same rows at the same
    positions, the same length and cursor, wrap-around included; the buffer
    then goes on as the original does."""
    make = (lambda s, n: batch(s, n)) if rows == "tensordict" else \
        (lambda s, n: torch.arange(s, s + n).float()[:, None].expand(n, 3).clone())
    theirs = ReplayBuffer(storage=LazyTensorStorage(20), batch_size=4)
    for s, n in ((0, 7), (7, 9), (16, 8)):  # 24 rows into 20
        theirs.extend(make(s, n))
    storage = TdStoreStorage(20, addr=addr)
    ours = ReplayBuffer(storage=storage, batch_size=4)
    try:
        ours.load_state_dict(theirs.state_dict())
        assert len(ours) == len(theirs) == 20 and ours.writer._cursor == theirs.writer._cursor
        got, want = storage.get(slice(None)), theirs.storage.get(slice(None))
        assert (got == want).all() if rows == "tensordict" else torch.equal(got, want)
        ours.extend(make(24, 3))
        theirs.extend(make(24, 3))
        got, want = storage.get(slice(None)), theirs.storage.get(slice(None))
        assert (got == want).all() if rows == "tensordict" else torch.equal(got, want)
    finally:
        storage.store.drop()


@tensorclass
class _TC:
    a: torch.Tensor
    b: torch.Tensor


@pytest.mark.parametrize("ndim", [1, 2])
def test_init_and_the_rows_attribute_as_in_lazy_tensor_storage(addr, ndim):
    """torchrl's ``storage._init(element)`` makes the storage for rows like
    it, and ``storage._storage`` is where the rows are (torchrl code reads
    it): same shapes and kinds as LazyTensorStorage on random element
    shapes, nothing written; ``_storage`` is the dict, read-only."""
    gen = torch.Generator().manual_seed(ndim)
    for trial in range(6):
        shape = torch.randint(1, 4, (int(torch.randint(ndim - 1, 3, (), generator=gen)),),
                              generator=gen).tolist()
        kind = ["tensordict", "tensorclass"][trial % 2]
        td = TensorDict({"a": torch.rand(*shape, 2, generator=gen),
                         "b": {"c": torch.rand(shape, generator=gen)}}, shape)
        element = td if kind == "tensordict" else _TC(a=td["a"], b=td["b", "c"],
                                                      batch_size=shape)
        theirs = LazyTensorStorage(12, ndim=ndim)
        ours = TdStoreStorage(12, addr=addr, ndim=ndim, length_ttl=0)
        try:
            theirs._init(element)
            ours._init(element)
            assert ours.initialized and len(ours) == len(theirs) == 0
            # (torchrl 0.14.1 sizes an ndim >= 2 storage by the numel of the
            # element's own dims too; tdstore by the storage dims, as
            # documented: compared where the element has no dims of its own)
            lazy_sized = ndim == 1 or len(shape) == ndim - 1
            assert ours._storage.shape == theirs._storage.shape or not lazy_sized, (shape, kind)
            assert ours._storage.shape[1:] == torch.Size(shape)
            assert type(ours._storage).__name__ == (
                "_TC" if kind == "tensorclass" else "TensorDictStore")
            assert ours.max_size == ours._storage.shape[:ndim].numel()
            assert ours.max_size == theirs.max_size or not lazy_sized
            with pytest.raises(AttributeError):
                ours._storage = None
        finally:
            ours.store.drop()
    assert TdStoreStorage(12, addr=addr)._storage is None  # before the first write

    @tensorclass
    class Local:  # found by no name: rows this process stored still come back as it
        a: torch.Tensor
    ours = TdStoreStorage(12, addr=addr, ndim=ndim)
    try:
        rows = Local(a=torch.arange(6.0).view(3, 2), batch_size=[3, 2][:ndim])
        ours._init(rows[0])
        assert type(ours._storage) is Local
        ours.set(slice(0, 3), rows)
        assert type(ours.get([0, 2])) is Local
        assert torch.equal(ours.get([0, 2]).a, rows.a[[0, 2]])
    finally:
        ours.store.drop()


def test_a_new_buffers_first_extend_connects_once(addr, monkeypatch):
    # Its first write opens the dict (another process may have made it) and,
    # finding none, creates it: both through one Client of the storage's,
    # not one each. Then a second extend and a sample make none.
    made = []
    real_init = tdstore.Client.__init__

    def counting_init(self, *args, **kwargs):
        made.append(args)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(tdstore.Client, "__init__", counting_init)
    rb = ReplayBuffer(storage=TdStoreStorage(100, addr=addr), batch_size=8)
    data = TensorDict({"obs": torch.randn(10, 3)}, [10])
    try:
        rb.extend(data)
        assert len(made) == 1
        rb.extend(data)
        assert rb.sample().shape == torch.Size([8])
        assert len(made) == 1
        assert torch.equal(rb.storage.get(torch.arange(20))["obs"], torch.cat([data["obs"]] * 2))
    finally:
        rb.storage.store.drop()

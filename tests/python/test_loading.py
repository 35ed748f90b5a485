"""Loading data from tdstore while training: StoreDataset under a DataLoader
with 2 worker processes (one read per batch, the batches equal the rows),
get_async futures (equal to the blocking reads, errors raised by result()),
and torchrl's own prefetch on a TdStoreStorage buffer."""

import pytest
import torch
from tensordict import TensorDict
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler
from torchrl.data import ReplayBuffer

from tdstore import TensorDictStore
from tdstore.torch import StoreDataset
from tdstore.torchrl import TdStoreStorage, TdStoreWriter


def make_store(addr, n=3000):
    ids = torch.arange(n)
    return TensorDictStore.from_tensordict(TensorDict({
        "id": ids, "obs": ids[:, None].float().expand(n, 256).clone(),
        "meta": {"even": ids % 2 == 0}}, [n]), addr=addr)


def test_a_dataloader_with_two_workers_reads_every_row_once_per_batch(addr):
    store = make_store(addr)
    try:
        dataset = StoreDataset(store.name, addr=addr, keys=["id", ("meta", "even")])
        assert len(dataset) == 3000
        loader = DataLoader(dataset, batch_size=None, num_workers=2,
                            sampler=BatchSampler(SequentialSampler(dataset), 256, drop_last=False),
                            collate_fn=StoreDataset.collate_fn, multiprocessing_context="spawn")
        seen = []
        for batch in loader:
            assert isinstance(batch, TensorDict)
            assert sorted(map(str, batch.keys(True, True))) == ["('meta', 'even')", "id"]
            assert torch.equal(batch["meta", "even"], batch["id"] % 2 == 0)
            seen.extend(batch["id"].tolist())
        assert seen == list(range(3000))
        # Without workers, a plain batch_size reads each batch in one call too.
        calls = []
        native = store._dict

        class Spy:
            def __getattr__(self, name):
                return getattr(native, name)

            def read(self, *args, **kwargs):
                calls.append(args)
                return native.read(*args, **kwargs)
        whole = StoreDataset(store)
        store._dict = Spy()
        try:
            batches = list(DataLoader(whole, batch_size=100, collate_fn=lambda b: b))
        finally:
            store._dict = native
        assert len(batches) == 30 and len(calls) == 30
        assert torch.equal(batches[3]["obs"][:, 0].long(), torch.arange(300, 400))
        with pytest.raises(ValueError, match="no batch dims"):
            StoreDataset(TensorDictStore(batch_size=[], addr=addr))
    finally:
        store.drop()


def test_get_async_equals_the_blocking_read_and_raises_on_result(addr):
    store = make_store(addr, 1000)
    try:
        g = torch.Generator().manual_seed(0)
        indices = [torch.randint(0, 1000, (128,), generator=g) for _ in range(12)]
        futures = [store.get_async(i) for i in indices]  # all in flight at once
        for index, future in zip(indices, futures):
            got = future.result(timeout=60)
            assert torch.equal(got["id"], index)
            assert torch.equal(got["obs"], store[index]["obs"])
        assert torch.equal(store.get_async("id").result(), torch.arange(1000))
        bad = store.get_async(torch.tensor([5, 1000]))
        with pytest.raises(IndexError):
            bad.result(timeout=60)
    finally:
        store.drop()


def test_torchrls_own_prefetch_on_a_tdstore_buffer(addr):
    storage = TdStoreStorage(500, addr=addr)
    rb = ReplayBuffer(storage=storage, writer=TdStoreWriter(), batch_size=64, prefetch=3)
    try:
        ids = torch.arange(400)
        rb.extend(TensorDict({"id": ids, "x": ids.float()}, [400]))
        for _ in range(10):
            sample = rb.sample()
            assert sample.batch_size == torch.Size([64])
            assert torch.equal(sample["x"].long(), sample["id"])
            assert int(sample["id"].max()) < 400
    finally:
        storage.store.drop()

"""PyTorch data loading on tdstore: ``StoreDataset`` for ``DataLoader``.

    from torch.utils.data import BatchSampler, DataLoader, RandomSampler
    from tdstore.torch import StoreDataset

    dataset = StoreDataset("train", addr=addr)            # or a TensorDictStore
    loader = DataLoader(dataset, batch_size=None, num_workers=2,
                        sampler=BatchSampler(RandomSampler(dataset), 256, drop_last=False),
                        collate_fn=StoreDataset.collate_fn)
    for batch in loader:                                   # a TensorDict of 256 rows
        ...

A map-style dataset over the rows (batch dim 0) of a tdstore dict. With a
``BatchSampler`` and ``batch_size=None``, each batch of positions reaches
``__getitem__`` as one list, read in ONE indexed call (not one call per
row): the DataLoader idiom for stores. ``__getitem__`` of an int gives one
row. ``collate_fn=StoreDataset.collate_fn`` hands the batch over as it
is (torch's default would take a TensorDict apart key by key). Nothing but
the dict's handle crosses to a worker: each worker process
opens its own connection (pickling by handle), so the dataset may be far
larger than any worker's memory.
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from ._store import TensorDictStore

__all__ = ["StoreDataset"]


class StoreDataset(Dataset):
    """The rows of the dict ``store`` (a TensorDictStore, or a name or
    handle opened at ``addr``). ``keys``: read only these leaves (nested
    keys as tuples); all by default."""

    def __init__(self, store, *, addr: str | None = None, keys=None, **options):
        if not isinstance(store, TensorDictStore):
            store = TensorDictStore.from_store(store, addr=addr, **options)
        if not store.batch_dims:
            raise ValueError(f"dict {store.name!r} has no batch dims: there are no rows to load")
        self._store = store
        # Full paths of the leaves (or sub-dicts) to read; None: all.
        self._paths = None if keys is None else [
            store.prefix + (k if isinstance(k, tuple) else (k,)) for k in keys]

    @property
    def store(self) -> TensorDictStore:
        return self._store

    def __len__(self) -> int:
        return int(self._store.batch_size[0])

    def __getitem__(self, index):
        """One row (an int) or the rows of a list / tensor of positions, in one
        indexed read; a local TensorDict."""
        if isinstance(index, list):
            index = torch.as_tensor(index, dtype=torch.int64)
        return self._store._index_read(index, self._paths)

    def __getitems__(self, indices):
        """What a DataLoader with ``batch_size`` (no BatchSampler) calls: one
        read for the whole batch."""
        return self[list(indices)]

    @staticmethod
    def collate_fn(batch):
        """The DataLoader's ``collate_fn``: a batch read in one call is
        already a TensorDict."""
        return batch

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._store.name!r}, rows={len(self)})"

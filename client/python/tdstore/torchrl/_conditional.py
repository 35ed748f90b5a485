"""torchrl's conditional updates (``ReplayBuffer.update_if_present``) on a
TdStoreStorage: the storage's three hooks, over the dict.

torchrl decides which records are still live (the writer's slot
generations, and a stored version compared with the incoming one); the
storage names a leaf (its dtype and shape, and the cells at some
coordinates), checks a patch before anything is written, and writes it.
Here:

- a leaf is a ``StoredLeaf``: its dtype and shape come from the dict's
  schema (no data is read); ``leaf[coords]`` reads just those cells (one
  indexed read: the stored versions a version check compares);
- a patch is written in ONE indexed write of every key at once, so other
  processes see all of a record's patched fields or none of them.

As in torchrl, the check and the write are atomic against this process's
other buffer calls (torchrl's locks), not against writers in other
processes: generations are the writer's, which is per process.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.utils import unravel_key

from .._dtypes import DTYPES
from ._rows import RowKind


class StoredLeaf:
    """One tensor leaf of a buffer's dict, as torchrl's conditional update
    reads a storage's leaf: ``dtype``, ``shape`` (the storage dims, the
    rows' own dims, then the element's) and ``device``; ``leaf[coords]`` is
    one indexed read of those cells."""

    def __init__(self, store, key, dtype: torch.dtype, shape: torch.Size, device):
        self._store = store
        self.key = key
        self.dtype = dtype
        self.shape = shape
        self.device = device

    def __getitem__(self, coords) -> torch.Tensor:
        return self._store.get_at(self.key, coords).to(self.device)


def patch_leaf(storage, key) -> StoredLeaf:
    """The leaf ``key`` of the buffer's dict. RuntimeError before the first
    write; KeyError for a key the dict lacks, or for rows that are not
    TensorDicts or tensorclasses (as torchrl: only a tensordict storage's
    fields can be patched)."""
    store = storage._opened()
    if store is None:
        raise RuntimeError("Conditional updates require an initialized storage: write some "
                           "data to the buffer before calling update_if_present.")
    key = unravel_key(key)
    path = (key,) if isinstance(key, str) else tuple(key)
    kind = RowKind.from_attrs(store.attrs, store.keys())
    found = None
    if kind.kind not in ("tensor", "pytree"):
        found = store._describe_full().get(path)
    if found is None or found[2] != "tensor" or found[0] not in DTYPES:
        raise KeyError(f"Key {key} does not exist in the storage: conditional patches can "
                       "only target existing tensor fields of a tensordict storage.")
    dtype_name, shape, _, _ = found
    device = torch.device(storage._device or "cpu")
    return StoredLeaf(store, key, DTYPES[dtype_name], torch.Size(shape), device)


def validated_patch(storage, index: torch.Tensor, patch: dict) -> dict:
    """``patch`` (key -> values of the records ``index`` names: one row per
    record, or anything that reshapes to that) checked against the dict and
    shaped ``[records, *element]``; ValueError for a dtype or a shape that
    does not fit, KeyError for a missing key, before anything is written."""
    coords = index.shape[-1] if index.ndim > 1 else 1
    records = index.shape[0] if index.ndim > 1 else index.numel()
    out = {}
    for key, value in patch.items():
        leaf = patch_leaf(storage, key)
        value = torch.as_tensor(value)
        if value.dtype != leaf.dtype:
            raise ValueError(f"dtype mismatch for patch key {key}: got {value.dtype}, "
                             f"the storage holds {leaf.dtype}.")
        element = leaf.shape[coords:]
        try:
            value = value.reshape((records, *element))
        except RuntimeError:
            raise ValueError(f"shape mismatch for patch key {key}: got {tuple(value.shape)}, "
                             f"expected {records} records with feature shape "
                             f"{tuple(element)}.") from None
        out[key] = value
    return out


def apply_patch(storage, index: torch.Tensor, patch: dict) -> None:
    """Writes a validated patch at the records ``index`` names (dim-0 rows,
    or one coordinate per storage dim in the last dim): every key in one
    indexed write."""
    coords = tuple(index.unbind(-1)) if index.ndim > 1 else (index,)
    records = coords[0].shape[0]
    rows = TensorDict({}, batch_size=[records])
    for key, value in patch.items():
        rows.set(key, value.cpu())
    storage._opened().update_at_(rows, coords)

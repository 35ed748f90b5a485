"""Ragged leaves: one tensor per batch cell, each of its own shape.

tensordict keeps such data in a ``LazyStackedTensorDict`` (``lazy_stack`` of
TensorDicts whose entries differ in shape). tdstore stores each key whose
shapes differ as a *ragged leaf*: a value leaf (_values.py) whose values are
tensors, encoded by the native module as cells (common/ragged_cells.h), one
dtype per leaf, named in the leaf record. Keys whose shapes agree stay
ordinary tensor leaves. So a cell is read and written in the same block call
as the tensor rows of its batch cell, by every index kind.

What a read gives back:

* ``td["key"]`` of a ragged leaf: a nested tensor (``torch.nested``,
  strided layout) when every cell has the same number of dims, else a list
  of tensors;
* ``td[idx]``, ``to_local()``: a ``LazyStackedTensorDict`` stacked along
  dim 0 whenever a ragged leaf is among the leaves read, each element a
  TensorDict with that row's tensors (an int index gives the row's
  TensorDict itself).
"""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, NonTensorStack, TensorDict, lazy_stack
from tensordict.base import is_tensor_collection
from tensordict.utils import is_non_tensor

from ._cells import RaggedCells
from ._dtypes import DTYPE_NAMES, DTYPES
from ._values import RAGGED, Values, from_non_tensor


def from_tensors(path_str: str, tensors: list, cells, dtype: torch.dtype | None = None) -> Values:
    """Values of a ragged leaf: ``tensors`` (C order over ``cells``) cast to
    ``dtype`` (default: the first one's)."""
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise TypeError(f"{path_str}: a ragged leaf holds tensors only")
    if dtype is None:
        # As torch.stack would: the dtype that holds every cell.
        dtype = tensors[0].dtype if tensors else torch.float32
        for t in tensors[1:]:
            dtype = torch.promote_types(dtype, t.dtype)
    if dtype not in DTYPE_NAMES:
        raise TypeError(f"{path_str}: dtype {dtype} cannot be stored")
    tensors = [t if t.dtype == dtype else t.to(dtype) for t in tensors]
    return Values(RAGGED, False, tensors, cells, spec=DTYPE_NAMES[dtype])


def _plain_elements(td) -> list:
    """The plain (not lazily stacked) elements of a lazy stack, C order."""
    if isinstance(td, LazyStackedTensorDict):
        out = []
        for sub in td.tensordicts:
            out.extend(_plain_elements(sub))
        return out
    return [td]


def _cells_of(td, key) -> list:
    """The tensors of ``key`` over every batch cell of ``td``, C order."""
    out = []
    for e in _plain_elements(td):
        t = e.get(key)
        n = e.batch_dims
        out.extend(t.reshape((e.batch_size.numel(),) + tuple(t.shape[n:])).unbind(0) if n
                   else [t])
    return out


def _leaf_keys(td) -> set:
    """Every leaf key of a plain TensorDict, non-tensors included."""
    out = set()
    for key in td.keys(include_nested=True):
        value = td.get(key)
        if is_non_tensor(value) or not is_tensor_collection(value):
            out.add(key if isinstance(key, tuple) else (key,))
    return out


def _stacked_on_dim_0(td):
    """``td`` with every lazy stack in it along dim 0: a stack along dim d > 0
    becomes the stack of its rows along dim 0 (each row a stack along dim
    d - 1 of the elements' rows), so its plain elements come in the C order
    of the batch cells. Views; nothing is copied."""
    if not isinstance(td, LazyStackedTensorDict):
        return td
    if td.stack_dim != 0:
        return LazyStackedTensorDict(*(_stacked_on_dim_0(row) for row in td.unbind(0)),
                                     stack_dim=0)
    return LazyStackedTensorDict(*(_stacked_on_dim_0(sub) for sub in td.tensordicts),
                                 stack_dim=0)


def flatten_lazy_stack(td: LazyStackedTensorDict, path: tuple, out: list) -> list:
    """Append ``(path, tensor or Values)`` for every leaf of the lazy stack
    (along any dim): a dense tensor where every element's shape agrees, a
    ragged leaf (a tensor per batch cell) where they differ, a non-tensor
    stack for non-tensor entries."""
    td = _stacked_on_dim_0(td)
    elements = _plain_elements(td)
    if not elements:
        return out
    # A lazy stack's keys() lists only the keys every element has (and its
    # leaves_only=True leaves non-tensors out): compare the elements' own.
    keys = _leaf_keys(elements[0])
    for i, e in enumerate(elements[1:], 1):
        if _leaf_keys(e) != keys:
            odd = sorted("/".join(k) for k in keys ^ _leaf_keys(e))
            raise ValueError(f"{'/'.join(path) or 'the stack'}: element {i} differs from element "
                             f"0 in keys {odd}: TensorDictStore stores lazy stacks whose elements "
                             "have the same keys")
    for key in sorted(keys):
        leaf_path = path + key
        path_str = "/".join(leaf_path)
        first = elements[0].get(key)
        if is_non_tensor(first):
            out.append((leaf_path, from_non_tensor(path_str, td.get(key))))
            continue
        cells = _cells_of(td, key)
        shapes = {tuple(c.shape) for c in cells}
        if len(shapes) <= 1:
            feat = shapes.pop() if shapes else ()
            dense = (torch.stack(cells) if cells
                     else torch.empty((0,) + feat, dtype=first.dtype if first is not None
                                      else torch.float32))
            out.append((leaf_path, dense.reshape(tuple(td.batch_size) + feat)))
        else:
            out.append((leaf_path, from_tensors(path_str, cells, td.batch_size)))
    return out


def has_ragged(source: dict) -> bool:
    for value in source.values():
        if isinstance(value, RaggedCells):
            return True
        if isinstance(value, dict) and has_ragged(value):
            return True
    return False


def _rows(source: dict, n: int) -> list:
    """The sources of rows 0..n-1 of a source dict, each leaf cut once
    (unbind, not one index per row and leaf: a 256-row sample of 5 leaves
    made 1,280 index calls)."""
    per_key = {}
    for key, value in source.items():
        if isinstance(value, dict):
            per_key[key] = _rows(value, n)
        elif isinstance(value, RaggedCells):
            per_key[key] = [value.row(i) for i in range(n)]
        elif isinstance(value, torch.Tensor):
            per_key[key] = value.unbind(0)
        elif isinstance(value, NonTensorStack) and value.stack_dim == 0:
            per_key[key] = value.tensordicts
        else:
            per_key[key] = [value[i] for i in range(n)]
    return [{key: rows[i] for key, rows in per_key.items()} for i in range(n)]


def _element(source: dict, batch, device):
    """The TensorDict (or, with more batch dims and ragged leaves, lazy stack)
    of one element: a source of rows over ``batch``."""
    if batch:
        return lazy_tensordict(source, batch, device)
    out = {}
    for key, value in source.items():
        if isinstance(value, dict):
            out[key] = _element(value, batch, device)
        elif isinstance(value, RaggedCells):
            out[key] = value.tensors[0] if device is None else value.tensors[0].to(device)
        elif device is not None and isinstance(value, torch.Tensor):
            out[key] = value.to(device)
        else:
            out[key] = value
    # Every value is a tensor or a TensorDict of this batch already: skip
    # the constructor's checks (about 20 us a row).
    return TensorDict._new_unsafe(source=out, batch_size=torch.Size(batch), device=device)


def lazy_tensordict(source: dict, batch, device):
    """A nested source dict holding ragged cells -> a LazyStackedTensorDict
    along dim 0 of the elements (rows) of ``batch``. With no batch dims, the
    one element's TensorDict; with no row at all, a TensorDict whose ragged
    leaves are empty ``batch + [0]`` tensors."""
    batch = torch.Size(batch)
    if not batch:
        return _element(source, batch, device)
    if batch[0] == 0:
        return TensorDict(_emptied(source, batch), batch_size=batch, device=device)
    rows = [_element(row, batch[1:], device) for row in _rows(source, batch[0])]
    return lazy_stack(rows, 0)


def _emptied(source: dict, batch) -> dict:
    out = {}
    for key, value in source.items():
        if isinstance(value, dict):
            out[key] = _emptied(value, batch)
        elif isinstance(value, RaggedCells):
            out[key] = torch.empty(tuple(batch) + (0,), dtype=DTYPES[value.spec])
        else:
            out[key] = value
    return out

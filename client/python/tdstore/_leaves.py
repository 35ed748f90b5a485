"""Leaves as they cross between tensordict and the native module: a value
(tensor, TensorDict, lazy stack, non-tensor) flattened into (path, tensor or
Values) leaves and their native tuples; leaves read back into tensors,
non-tensors and nested TensorDicts; paths as text.

Pure functions over torch and tensordict: no store state, no calls to
tdstored.
"""

from __future__ import annotations

import torch
from torch.utils.dlpack import from_dlpack as _from_dlpack
from tensordict import (LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict)
from tensordict._td import _unravel_key_to_tuple
from tensordict.base import is_tensor_collection
from tensordict.utils import is_non_tensor

from . import _ragged, _values
from ._dtypes import DTYPE_NAMES, cpu_contiguous
from ._values import RAGGED, Values


def _leaf_from(dtype_name: str, shape, data, kind: str = "tensor", value: bytes = b""):
    """A leaf as the native module read it: a tensor (``data``, the DLPack
    capsule of ``read(..., dlpack=True)``, which torch wraps in one call with
    no copy), or for a value leaf its NonTensorData / NonTensorStack
    (_values.py)."""
    if kind == "tensor":
        return _from_dlpack(data)
    slots = _from_dlpack(data) if shape[-1] else None
    return _values.to_non_tensor(kind, tuple(shape), slots, value)


def _cpu_contiguous(path, t: torch.Tensor) -> torch.Tensor:
    """``t`` as plain contiguous CPU memory the native module can read in place."""
    return cpu_contiguous(_path_str(path), t)


def _native_leaves(items, batch_size=None):
    """``[(path, tensor)]`` -> (native leaf tuples, tensors to keep alive). A
    whole one-value leaf (NonTensorData) is stored at ``batch_size``, the
    dict's, whatever batch its sub-dict gave it."""
    leaves = []
    keep = []
    for path, t in items:
        if isinstance(t, Values):
            if t.one and t.slot is None and batch_size is not None:
                t = t.at_cells(batch_size)
            leaves.append(_value_leaf(path, t, t.slot))
            keep.append(leaves[-1])
            continue
        t = _cpu_contiguous(path, t)
        keep.append(t)
        leaves.append((path, DTYPE_NAMES[t.dtype], tuple(t.shape), t.data_ptr(),
                       t.numel() * t.element_size()))
    return leaves, keep


def _value_leaf(path, values: Values, slot: int | None = None, kind: str | None = None):
    """The native leaf tuple of a whole value leaf (or of rows at ``slot``),
    its slots encoded. The tuple's last item keeps the slots alive."""
    kind = kind or values.kind
    if values.one and slot is None:
        (raw,) = values.encoded(kind)
        return (path, "uint8", tuple(values.cells) + (0,), 0, 0, kind, raw)
    encoded = [_values.encode_value(kind, v) for v in values.per_cell()]
    slot = _values.slot_for(encoded) if slot is None else slot
    rows = _values.encode_rows(encoded, values.cells, slot)
    # Ragged cells name their dtype: the leaf's record keeps it, and rows
    # written into a leaf of another dtype are refused.
    spec = values.spec.encode() if kind == RAGGED else b""
    return _ValueLeaf((path, "uint8", tuple(rows.shape), rows.data_ptr(), rows.numel(), kind,
                       spec), rows)


class _ValueLeaf(tuple):
    """A native leaf tuple that holds its slots' tensor alive."""

    def __new__(cls, fields, rows):
        obj = super().__new__(cls, fields)
        obj.rows = rows
        return obj


def _path_str(path) -> str:
    return "/".join(path)


def _as_tensor(path, value):
    """A leaf's value as a tensor, or as Values for what tensordict keeps as
    NonTensorData (text, bytes, None, and what torch cannot make a tensor of
    but JSON can hold)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (str, bytes, bytearray)) or value is None:
        return _values.from_non_tensor(_path_str(path), value)
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        # Not a tensor: one JSON value (as tensordict makes it NonTensorData),
        # or a TypeError that says what tdstore stores.
        return _values.from_non_tensor(_path_str(path), value)


def _lives_elsewhere(value) -> bool:
    """A TensorDict whose leaves live in a store (ours, or tensordict's own):
    it has ``to_local()``, which reads them all in one call."""
    return is_tensor_collection(value) and callable(getattr(type(value), "to_local", None))


def _leading_rows(value, items) -> int:
    """The rows an append of ``value`` (flattened to ``items``) carries: its
    batch dim 0 (a TensorDict's, else the first leaf's leading dim)."""
    if is_tensor_collection(value) and not _lives_elsewhere(value):
        if not value.batch_dims:
            raise ValueError("appended rows need a batch dim: got batch size []")
        return int(value.batch_size[0])
    first = items[0][1]
    shape = first.cells if isinstance(first, Values) else first.shape
    if not len(shape):
        raise ValueError(f"appended rows need a leading dim: {_path_str(items[0][0])} has none")
    return int(shape[0])


def _flatten(value, path, out):
    """Append ``(path, tensor)`` for every leaf of ``value`` (tensor, dict,
    TensorDict, TensorDictStore) under ``path``."""
    if isinstance(value, torch.Tensor):
        if value.is_nested:  # one tensor per row, each of its own shape
            out.append((path, _ragged.from_tensors(_path_str(path), list(value.unbind()),
                                                   (value.size(0),))))
        else:
            out.append((path, value))
    elif _lives_elsewhere(value):
        _flatten(value.to_local(), path, out)
    elif is_non_tensor(value):
        out.append((path, _values.from_non_tensor(_path_str(path), value)))
    elif isinstance(value, LazyStackedTensorDict):
        _ragged.flatten_lazy_stack(value, path, out)
    elif is_tensor_collection(value):
        for key, sub in value.items():
            _flatten(sub, path + (key,), out)
    elif isinstance(value, dict):
        for key, sub in value.items():
            key = _unravel_key_to_tuple(key)
            if not key:
                raise TypeError(f"dict keys must be str or tuples of str, got {key!r}")
            _flatten(sub, path + key, out)
    elif (isinstance(value, (list, tuple)) and value
          and all(isinstance(v, torch.Tensor) for v in value)
          and len({tuple(v.shape) for v in value}) > 1):
        # A list of tensors of different shapes: one per row.
        out.append((path, _ragged.from_tensors(_path_str(path), list(value), (len(value),))))
    else:
        out.append((path, _as_tensor(path, value)))
    return out


def _nest(leaves, strip: int):
    """Native read leaves -> nested dict of tensors, paths cut by ``strip``."""
    source: dict = {}
    for path, dtype, shape, buf, kind, value in leaves:
        rel = path[strip:]
        node = source
        for comp in rel[:-1]:
            node = node.setdefault(comp, {})
        node[rel[-1]] = _leaf_from(dtype, shape, buf, kind, value)
    return source


def _to_tensordict(source: dict, batch_size, device) -> TensorDict:
    """Nested dict of CPU tensors -> TensorDict on ``device`` (no checks: the
    server guarantees every leaf starts with the batch dims). With a ragged
    leaf among them, a LazyStackedTensorDict (_ragged.py; with no batch dims,
    the TensorDict of the one cell)."""
    if _ragged.has_ragged(source):
        return _ragged.lazy_tensordict(source, batch_size, device)
    for key, value in source.items():
        if isinstance(value, dict):
            source[key] = _to_tensordict(value, batch_size, device)
        elif device is not None and value.device != device:
            source[key] = value.to(device)
    return TensorDict._new_unsafe(source=source, batch_size=torch.Size(batch_size),
                                  device=device)


def _node_paths(leaf_paths):
    """Every proper prefix of the leaf paths: the sub-dicts (the store has no
    empty sub-dicts, so these are all of them)."""
    nodes = set()
    for path in leaf_paths:
        for i in range(1, len(path)):
            nodes.add(path[:i])
    return nodes


def _selects_all(index) -> bool:
    """True for td[...], td[()], td[:], td[:, ...]: tensordict returns the
    TensorDict itself for these, so the store does too."""
    if index is Ellipsis or (type(index) is slice and index == _ALL):
        return True
    if type(index) is not tuple:
        return False
    return all(i is Ellipsis or (type(i) is slice and i == _ALL) for i in index)


_ALL = slice(None)


def _unwrap(value):
    """td["key"] of a non-tensor gives its content, as tensordict's does: the
    value of a NonTensorData, the list of a NonTensorStack."""
    if isinstance(value, NonTensorData):
        return value.data
    if isinstance(value, NonTensorStack):
        return value.tolist()
    return value


def _key_of(path):
    return path[0] if len(path) == 1 else path

"""Non-tensor leaves: tensordict's ``NonTensorData`` and ``NonTensorStack`` as
tdstore value leaves (docs/storage-layout.md, "Value leaves").

A value is JSON, UTF-8 text or raw bytes, and nothing else: tdstore never
pickles and never unpickles. Each leaf has one kind:

* ``text``: every value a ``str``;
* ``bytes``: every value ``bytes`` (or ``bytearray``/``memoryview``);
* ``json``: anything else ``json.dumps`` takes (numbers, bools, None, lists,
  dicts of those; strings too, when mixed with them).

Two forms, chosen as tensordict chooses them:

* one value for the whole (sub-)dict (``NonTensorData``): held in the leaf's
  record, at most 64 KiB, read with the schema;
* one value per batch cell (``NonTensorStack``): each cell a fixed slot of
  the leaf's rows, read and written with the tensor rows of the same cells.

Slots are sized by the native module's rule (``value_slot_bytes``): the next
power of two that holds the longest value and its 4-byte length.

A ragged leaf (kind ``ragged``, _ragged.py) is stored the same way: its
values are tensors, one per cell, each of its own shape, and ``spec`` names
their dtype.
"""

from __future__ import annotations

import json
import math

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

from . import _native
from ._cells import RaggedCells, encode_cell
from ._cells import decode_rows as decode_cells

KINDS = ("text", "json", "bytes")
RAGGED = "ragged"
_LENGTH_BYTES = 4


class Values:
    """A non-tensor leaf to write: its kind, form and Python values.

    ``cells`` is the batch shape the values cover; ``values`` holds one value
    per cell in C order (a stack), or exactly one (``one``: NonTensorData,
    which stands for every cell)."""

    __slots__ = ("kind", "one", "values", "cells", "slot", "spec")

    def __init__(self, kind: str, one: bool, values: list, cells, slot: int | None = None,
                 spec: str = ""):
        self.kind = kind
        self.one = one
        self.values = values
        self.cells = torch.Size(cells)
        # Set for rows written into an existing leaf: its slot size (and
        # `kind` its kind). None: a whole leaf, sized by its values.
        self.slot = slot
        # A ragged leaf's cell dtype name (every value a tensor of it); ""
        # for the other kinds.
        self.spec = spec

    def as_rows(self, kind: str, slot: int) -> "Values":
        """These values as rows of a leaf of ``kind`` with slots of ``slot``
        bytes."""
        return Values(kind, self.one, self.values, self.cells, slot, self.spec)

    def fits(self, kind: str, slot: int) -> bool:
        return all(v is None or len(v) <= slot - _LENGTH_BYTES for v in self.encoded(kind))

    @property
    def shape(self) -> torch.Size:
        """The cells' shape: what a batch-dims check compares."""
        return self.cells

    def encoded(self, kind: str | None = None) -> list[bytes]:
        kind = kind or self.kind
        return [encode_value(kind, v) for v in self.values]

    def at_cells(self, cells) -> "Values":
        """These values stretched over ``cells`` (a NonTensorData broadcasts)."""
        cells = torch.Size(cells)
        if self.cells == cells:
            return self
        if self.one:
            return Values(self.kind, True, self.values, cells, self.slot, self.spec)
        # A stack broadcasts as a tensor of its cells would.
        ids = torch.arange(max(self.cells.numel(), 1)).reshape(self.cells).expand(cells)
        return Values(self.kind, False, [self.values[i] for i in ids.reshape(-1).tolist()], cells,
                      self.slot, self.spec)

    def per_cell(self) -> list:
        """One value per cell, C order."""
        if self.one:
            return self.values * self.cells.numel()
        return self.values


def _kind_of(items) -> str:
    if items and all(isinstance(v, str) for v in items):
        return "text"
    if items and all(isinstance(v, (bytes, bytearray, memoryview)) for v in items):
        return "bytes"
    return "json"


def encode_value(kind: str, value) -> bytes | None:
    """A value's bytes in a slot of a ``kind`` leaf; None for a text or bytes
    row never written (read back as None, rewritten as such: an all-zero
    slot)."""
    if value is None and kind in ("text", "bytes"):
        return None
    if kind == RAGGED:
        return encode_cell(value)
    if kind == "text":
        return value.encode("utf-8")
    if kind == "bytes":
        return bytes(value)
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def decode_value(kind: str, raw: bytes | None):
    # None: a row no one wrote, or one a resize added (tensordict's store
    # reads it as None too, apart from a written "").
    if raw is None:
        return None
    if kind == "text":
        return raw.decode("utf-8")
    if kind == "bytes":
        return raw
    return json.loads(raw) if raw else None


def widest_kind(a: str, b: str) -> str:
    """The kind that holds values of both: text and bytes only hold their own,
    and bytes mix with nothing (JSON has no bytes)."""
    if a == b:
        return a
    if RAGGED in (a, b):
        raise TypeError(f"tensors of their own shapes cannot join a {a if b == RAGGED else b} "
                        "leaf (or the reverse): a ragged leaf holds tensors only")
    if "bytes" in (a, b):
        raise TypeError(f"bytes values cannot join a {a if b == 'bytes' else b} leaf (or the "
                        "reverse): a leaf holds text, bytes or JSON values")
    return "json"


def _check_storable(path_str: str, kind: str, items) -> None:
    if kind != "json":
        return
    for v in items:
        if isinstance(v, (bytes, bytearray, memoryview)):
            raise TypeError(f"{path_str}: bytes mixed with other values cannot be stored: "
                            "a leaf holds text, bytes or JSON values")
        try:
            json.dumps(v, ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"{path_str}: {type(v).__name__} value cannot be stored: tdstore stores "
                f"JSON, text or bytes and never pickles ({e})") from None


def _flat(nested, depth: int) -> list:
    if depth == 0:
        return [nested]
    out = []
    for item in nested:
        out.extend(_flat(item, depth - 1))
    return out


def from_non_tensor(path_str: str, value) -> Values:
    """A ``NonTensorData``/``NonTensorStack`` as Values; TypeError for what
    tdstore does not store."""
    if isinstance(value, NonTensorStack):
        cells = value.batch_size
        items = _flat(value.tolist(), len(cells))
        one = False
    elif isinstance(value, NonTensorData):
        cells = value.batch_size
        items = [value.data]
        one = True
    else:  # a bare Python value, as td["k"] = "text" sets it
        cells = torch.Size(())
        items = [value]
        one = True
    if any(isinstance(v, torch.Tensor) for v in items):
        raise TypeError(f"{path_str}: a non-tensor holding tensors cannot be stored: store the "
                        "tensors as leaves")
    kind = _kind_of(items)
    _check_storable(path_str, kind, items)
    return Values(kind, one, items, cells)


def slot_for(values: list) -> int:
    return _native.value_slot_bytes(max((len(v) for v in values if v is not None), default=0))


def encode_rows(encoded: list, cells, slot: int) -> torch.Tensor:
    """The slots of ``encoded`` (one per cell, C order; None: a row never
    written, an all-zero slot) as a uint8 tensor of shape ``cells + [slot]``."""
    out = torch.empty(tuple(cells) + (slot,), dtype=torch.uint8)
    if encoded:
        _native.encode_values([b"" if v is None else v for v in encoded], slot,
                              out.data_ptr(), out.numel())
        flat = out.view(-1, slot)
        for i, v in enumerate(encoded):
            if v is None:
                flat[i].zero_()
    return out


def decode_rows(kind: str, slots: torch.Tensor, spec: str = "") -> list:
    """The values of a uint8 ``[..., slot]`` tensor of slots, C order."""
    if kind == RAGGED:
        return decode_cells(spec, slots)
    slots = slots.contiguous()
    count = math.prod(slots.shape[:-1])
    raw = _native.decode_values(slots.data_ptr(), count, slots.shape[-1]) if count else []
    return [decode_value(kind, r) for r in raw]


_SCALAR = torch.Size(())


def _cell_fast(value) -> NonTensorData:
    """A 0-d NonTensorData of ``value``, made as tensordict 0.14's constructor
    leaves one, without its per-object checks (about 25 us each: a 256-row
    sample paid 8 ms for its strings). _FAST says whether it may be used."""
    cell = object.__new__(NonTensorData)
    cell.__dict__.update(_tensordict=TensorDict._new_unsafe({}, batch_size=_SCALAR),
                         _non_tensordict={"data": value, "_is_non_tensor": True,
                                          "_metadata": None},
                         _is_initialized=True)
    return cell


def _cell_public(value) -> NonTensorData:
    return NonTensorData(value)


def _fast_cells_work() -> bool:
    """The fast cells behave as tensordict's own in what the store relies on;
    a tensordict whose internals differ gets the public constructor."""
    try:
        fast = NonTensorStack._new_lazy_unsafe(_cell_fast("a"), _cell_fast([1]), stack_dim=0)
        public = NonTensorStack(NonTensorData("a"), NonTensorData([1]))
        return (type(fast) is type(public) and fast.tolist() == public.tolist()
                and fast.batch_size == public.batch_size and fast[1].data == [1]
                and TensorDict({"t": fast}, [2])[0]["t"] == "a")
    except Exception:  # noqa: BLE001 - any failure means: do not use it
        return False


_FAST = _fast_cells_work()
_cell = _cell_fast if _FAST else _cell_public


def _stack(flat: list, cells) -> NonTensorStack:
    """A NonTensorStack of ``cells`` from its values in C order. Each value is
    its own NonTensorData (from_list would take a JSON list for one more
    batch dim)."""
    if len(cells) == 1:
        items = [_cell(v) for v in flat]
    else:
        step = math.prod(cells[1:])
        items = [_stack(flat[i * step:(i + 1) * step], cells[1:]) for i in range(cells[0])]
    if _FAST and items:
        return NonTensorStack._new_lazy_unsafe(*items, stack_dim=0)
    return NonTensorStack(*items)


def to_non_tensor(kind: str, shape, data, one_value: bytes):
    """The NonTensorData / NonTensorStack of a value leaf as read: ``shape``
    is its shape (cells + [slot]); ``data`` its slots (a tensor) or, for the
    one-value form (slot 0), ignored."""
    cells = torch.Size(shape[:-1])
    if kind == RAGGED:
        return RaggedCells(decode_rows(kind, data, one_value.decode()), cells,
                           one_value.decode())
    if shape[-1] == 0:
        return NonTensorData(decode_value(kind, one_value), batch_size=cells)
    values = decode_rows(kind, data)
    if len(cells) == 0:
        # A dict without batch dims has one cell: a stack needs a dim.
        return NonTensorData(values[0], batch_size=cells)
    return _stack(values, cells)
